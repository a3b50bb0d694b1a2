"""The stored format, no TensorFlow: the names every stage shares (``names``), the record types
(``records``) and the codec that validates them (``codec``, ``limits``), their compact forms
(``columns``, ``compaction``), and payloads in TensorBoard summaries (``payload``, ``metadata``)."""
