"""Build /app/calc deterministically: 60 commits of a small calculator, one of which breaks
right-associative '^', and two short stretches where the module does not even import."""
import os
import random
import subprocess
import sys

repo = sys.argv[1]
os.makedirs(repo, exist_ok=True)
rng = random.Random(1312)
ENV = dict(os.environ, GIT_AUTHOR_NAME="Robin Calc", GIT_AUTHOR_EMAIL="robin@example.com",
           GIT_COMMITTER_NAME="Robin Calc", GIT_COMMITTER_EMAIL="robin@example.com")
BAD_AT, BROKEN = 37, {19: 20, 46: 47}  # commit numbers (1-based); BROKEN maps break -> fix

CALC = '''"""Tiny calculator: + - * / ^ and parentheses. '^' binds tighter than '*' and is right-associative."""
import re
import sys

TOKEN = re.compile(r"\\s*(?:(\\d+(?:\\.\\d*)?)|(\\S))")


def tokenize(text):
    tokens = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m:
            raise SyntaxError(f"bad input at {pos}")
        tokens.append(float(m.group(1)) if m.group(1) else m.group(2))
        pos = m.end()
    return tokens


class Parser:
    def __init__(self, tokens):
        self.tokens = tokens
        self.i = 0

    def peek(self):
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self):
        tok = self.peek()
        self.i += 1
        return tok

    def expr(self):
        value = self.term()
        while self.peek() in ("+", "-"):
            value = value + self.term() if self.take() == "+" else value - self.term()
        return value

    def term(self):
        value = self.power()
        while self.peek() in ("*", "/"):
            value = value * self.power() if self.take() == "*" else value / self.power()
        return value

    def power(self):
        base = self.unary()
        if self.peek() == "^":
            self.take()
            return base ** self.power()
        return base

    def unary(self):
        if self.peek() == "-":
            self.take()
            return -self.unary()
        return self.atom()

    def atom(self):
        tok = self.take()
        if tok == "(":
            value = self.expr()
            if self.take() != ")":
                raise SyntaxError("missing )")
            return value
        if isinstance(tok, float):
            return tok
        raise SyntaxError(f"unexpected {tok!r}")


def evaluate(text):
    parser = Parser(tokenize(text))
    value = parser.expr()
    if parser.peek() is not None:
        raise SyntaxError(f"trailing input {parser.peek()!r}")
    return value


def fmt(value):
    return str(int(value)) if value == int(value) else repr(value)
#HELPERS#

if __name__ == "__main__":
    print(fmt(evaluate(" ".join(sys.argv[1:]))))
'''
GOOD_POWER = '''    def power(self):
        base = self.unary()
        if self.peek() == "^":
            self.take()
            return base ** self.power()
        return base
'''
BAD_POWER = '''    def power(self):
        # simplified: one loop instead of recursion
        value = self.unary()
        while self.peek() == "^":
            self.take()
            value = value ** self.unary()
        return value
'''
subjects = ["Tidy imports", "Document operator precedence", "Add examples to README", "Rename helper",
            "Add helper for percentages", "Improve error message", "Update changelog", "Add clamp helper",
            "Refactor formatting of results", "Add average helper", "Small style fixes", "Add notes on floats",
            "Add sign helper", "Tweak README wording", "Add lerp helper", "Mention Python version"]


def git(*args):
    subprocess.run(["git", *args], cwd=repo, env=ENV, check=True, capture_output=True)


git("init", "-q", "-b", "main")
helpers, readme, changes = [], ["# calc", "", "Usage: `python3 calc.py '1 + 2 * 3'`", ""], ["# Changes", ""]
broken = False
for n in range(1, 61):
    subject = "Initial calculator" if n == 1 else rng.choice(subjects)
    kind = rng.random()
    if n > 1 and kind < 0.45:
        name = f"helper_{n}"
        helpers.append(f"\n\ndef {name}(x):\n    \"\"\"Helper added in change {n}.\"\"\"\n    return x * {rng.randint(2, 9)}")
    elif n > 1 and kind < 0.75:
        readme.append(f"- note {n}: {rng.choice(['precedence', 'floats', 'parentheses', 'errors'])}")
    else:
        changes.append(f"- change {n}")
    if n in BROKEN:
        subject, broken = "Start splitting the tokenizer", True
    elif n in BROKEN.values():
        subject, broken = "Finish splitting the tokenizer", False
    if n == BAD_AT:
        subject = "Small style fixes"  # bland subject: find it by testing, not by grep
    src = CALC.replace("#HELPERS#", "".join(helpers))
    if n >= BAD_AT:
        src = src.replace(GOOD_POWER, BAD_POWER)
    if broken:
        src = src.replace("def tokenize(text):", "def tokenize(text)")  # SyntaxError on import
    with open(os.path.join(repo, "calc.py"), "w") as f:
        f.write(src)
    with open(os.path.join(repo, "README.md"), "w") as f:
        f.write("\n".join(readme) + "\n")
    with open(os.path.join(repo, "CHANGES.md"), "w") as f:
        f.write("\n".join(changes) + "\n")
    ENV["GIT_AUTHOR_DATE"] = ENV["GIT_COMMITTER_DATE"] = f"@{1700000000 + n * 5400} +0000"
    git("add", "-A")
    git("commit", "-q", "-m", subject)
