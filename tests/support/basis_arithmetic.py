"""A What-if basis line's arithmetic, read as a user reads it (issue 39): the API's, the CLI's and the tab's
Basis text must give the projected figure printed beside it."""

from __future__ import annotations

import re
from typing import Tuple

SIZE = r"(-?[\d,]+(?:\.\d+)?) (B|KiB|MiB|GiB)"
UNIT = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def basis_arithmetic(formula: str) -> Tuple[float, float]:
    """(What a basis line's printed arithmetic gives, how far its printed rounding may put that off): a
    leading "12.49 MiB: ..." for a state figure, else "A carry the batch x f = ...; B do not, kept | x g" (no
    "x f" where only the length is asked; "none in use at this moment": 0), A at another sequence length
    "S1 x r (seq) + S2 x r2 (seq²) + S0", under another precision policy "; + W kept wide (norms, loss, ints, its
    copy)" (or "; - W wide already")."""
    def size(number: str, unit: str) -> Tuple[float, float]:
        return float(number.replace(",", "")) * UNIT[unit], 0.5 if unit == "B" else 0.005 * UNIT[unit]

    lead = re.match(SIZE + ": ", formula)
    if lead:
        return size(*lead.groups())
    total = slack = 0.0
    # the batch-carrying bytes: one size, or at another sequence length "A x r (seq) + B x r2 (seq²) + C"
    term = SIZE + r"(?: x ([\d.,]+) \(seq²?\))?"
    factor = r"(?: x (?P<factor>[\d.,]+)(?: \([a-z ]+\))?)?"  # "x 0.5 (dtype)"; none where only the length is asked
    carried = re.search(f"((?:{term} \\+ )*{term}) carry the batch{factor} = ", formula)
    rest = re.search("; " + SIZE + r" do not, (kept|x ([\d.,]+))", formula)
    assert carried or rest or formula.startswith("none in use at this moment"), formula
    if carried:
        batch_factor = float((carried.group("factor") or "1").replace(",", ""))
        for number, unit, factor_text in re.findall(term, carried.group(1)):
            value, off = size(number, unit)
            factor = batch_factor * (float(factor_text.replace(",", "")) if factor_text else 1.0)
            total += value * factor
            slack += off * factor + value * factor * (0.0005 + (0.0005 if factor_text else 0))  # factors: 4 digits
    if rest:
        value, off = size(rest.group(1), rest.group(2))
        factor = float(rest.group(4).replace(",", "")) if rest.group(4) else 1.0
        total += value * factor
        slack += off * factor + (value * factor * 0.0005 if rest.group(4) else 0)
    wide = re.search("; ([+-]) " + SIZE + r" (?:kept wide|wide already) \(", formula)
    if wide:  # a policy's float32-kept bytes and the loss's float32 copy
        value, off = size(wide.group(2), wide.group(3))
        total += value if wide.group(1) == "+" else -value
        slack += off
    return total, slack
