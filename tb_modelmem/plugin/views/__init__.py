"""What the tab shows, computed from decoded records: pure functions and prepared views, no I/O.

A prepared view (``BreakdownView``, ``TraceView``) is built once per item (and, for a trace, per
breakdown it is joined with) and cached by the store; a request then only pages, sorts and
filters it (``pager``). Joins and aggregations are linear in ops + layers.
"""
