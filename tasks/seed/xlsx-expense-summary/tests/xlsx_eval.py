"""A small spreadsheet-formula evaluator over an openpyxl workbook (formulas kept as text):
cell references, ranges, numbers, strings, + - * / and a fixed list of functions."""
import decimal

from openpyxl.formula.tokenizer import Token, Tokenizer
from openpyxl.utils.cell import range_boundaries


class Eval:
    """Values of cells; formulas are translated token by token into a restricted expression."""

    def __init__(self, wb):
        self.wb, self.seen = wb, set()

    def cell(self, sheet, coord):
        value = self.wb[sheet][coord].value
        if isinstance(value, str) and value.startswith("="):
            if (sheet, coord) in self.seen:
                raise ValueError(f"circular reference at {sheet}!{coord}")
            self.seen.add((sheet, coord))
            try:
                return self.formula(sheet, value)
            finally:
                self.seen.discard((sheet, coord))
        return value

    def ref(self, sheet, text):
        name, _, area = text.rpartition("!")
        name = name.strip("'") or sheet
        if name not in self.wb.sheetnames:
            raise ValueError(f"unknown sheet {name!r}")
        ws = self.wb[name]
        c1, r1, c2, r2 = range_boundaries(area.replace("$", ""))
        r1, r2 = r1 or 1, min(r2 or ws.max_row, ws.max_row)
        c1, c2 = c1 or 1, min(c2 or ws.max_column, ws.max_column)
        cells = [[self.cell(name, ws.cell(r, c).coordinate) for c in range(c1, c2 + 1)]
                 for r in range(r1, r2 + 1)]
        if ":" not in area:
            return cells[0][0]
        return [v for row in cells for v in row]

    def formula(self, sheet, text):
        out = []
        for t in Tokenizer(text).items:
            if t.type == Token.OPERAND and t.subtype == Token.RANGE:
                out.append(f"_ref({t.value!r})")
            elif t.type == Token.OPERAND and t.subtype == Token.NUMBER:
                out.append(repr(float(t.value)))
            elif t.type == Token.OPERAND and t.subtype == Token.TEXT:
                out.append(repr(t.value[1:-1].replace('""', '"')))
            elif t.type == Token.FUNC and t.subtype == Token.OPEN:
                name = t.value[:-1].upper()
                if name not in FUNCS:
                    raise ValueError(f"function {name} is not allowed")
                out.append(f"_f[{name!r}](")
            elif t.type in (Token.FUNC, Token.PAREN):
                out.append(t.value)
            elif t.type == Token.SEP and t.value == ",":
                out.append(",")
            elif t.type in (Token.OP_IN, Token.OP_PRE) and t.value in "+-*/":
                out.append(t.value)
            elif t.type != Token.WSPACE:
                raise ValueError(f"unsupported part {t.value!r} in {text}")
        env = {"__builtins__": {}, "_f": FUNCS, "_ref": lambda r: self.ref(sheet, r)}
        return eval("".join(out), env)  # only the tokens translated above reach this


def nums(args):
    flat = [v for a in args for v in (a if isinstance(a, list) else [a])]
    return [float(v) for v in flat if isinstance(v, (int, float)) and not isinstance(v, bool)]


def match(value, crit):
    if isinstance(crit, str) and isinstance(value, str):
        return value.strip().lower() == crit.strip().lower()
    return value == crit


def pick(rng, crit, vals=None):
    return [v for k, v in zip(rng, vals or rng) if match(k, crit)]


def excel_round(x, n=0):
    q = decimal.Decimal(1).scaleb(-int(n))
    return float(decimal.Decimal(repr(float(x))).quantize(q, decimal.ROUND_HALF_UP))


FUNCS = {
    "SUM": lambda *a: sum(nums(a)),
    "SUMIF": lambda r, c, s=None: sum(nums([pick(r, c, s)])),
    "COUNTIF": lambda r, c: len(pick(r, c)),
    "AVERAGEIF": lambda r, c, s=None: (lambda v: sum(v) / len(v))(nums([pick(r, c, s)])),
    "AVERAGE": lambda *a: (lambda v: sum(v) / len(v))(nums(a)),
    "COUNT": lambda *a: len(nums(a)),
    "COUNTA": lambda *a: len([v for x in a for v in (x if isinstance(x, list) else [x]) if v not in (None, "")]),
    "MIN": lambda *a: min(nums(a)),
    "MAX": lambda *a: max(nums(a)),
    "ROUND": excel_round,
}
