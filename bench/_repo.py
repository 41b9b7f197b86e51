"""The generated repository the economy bench works on: a small bookkeeping package with planted bugs.

`make_repo(root, tiny=False)` writes it and commits it to git. The full repository has 40 files (a
package of 12 modules, 10 test files, docs, data, helper scripts) and two planted bugs: `allocate` in
ledger/money.py drops its rounding drift, `is_leap` in ledger/dates.py misses the 400-year rule. The tiny
one has 5 files and only the first bug.

`run_tests.py` is a small pytest-like runner: one verbose line per check (279 checks, so a run prints
about 22,000 characters), then a short summary naming each failure. It prints no timings or
absolute paths, so its output is the same on every machine and every run. It exits 1 on a failure.

`FIXES` are the (file, old, new) edits that repair the bugs; `SURVEY_READS` the files a survey reads.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

__all__ = ["FIXES", "SURVEY_READS", "make_repo", "run_suite"]

RUN_TESTS = '''\
"""Runs every check in tests/test_*.py and prints a verbose log, the way `pytest -v` does."""
import importlib.util
import pathlib
import sys
import traceback

ROOT = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))


def load(path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def collect():
    checks = []
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        module = load(path)
        for name in sorted(n for n in dir(module) if n.startswith("test_")):
            fn = getattr(module, name)
            for case in getattr(fn, "cases", [()]):
                checks.append((f"tests/{path.name}::{name}", fn, case))
    return checks


def main():
    checks = collect()
    print("=" * 28 + " test session starts " + "=" * 28)
    print(f"platform {sys.platform} -- Python {sys.version_info[0]}.{sys.version_info[1]}, runner 1.4")
    print(f"rootdir: {ROOT.name}")
    print(f"collected {len(checks)} items")
    print()
    failures = []
    for number, (name, fn, case) in enumerate(checks, 1):
        label = f"{name}[{'-'.join(map(str, case))}]" if case else name
        try:
            fn(*case)
            status = "PASSED"
        except Exception as exc:  # a failing check is reported, never fatal
            status = "FAILED"
            where = traceback.extract_tb(exc.__traceback__)[-1]
            place = f"{where.filename.split('/')[-1]}:{where.lineno}"
            failures.append(f"FAILED {label} - {type(exc).__name__}: {exc} ({place})")
        print(f"{label} {status}".ljust(70) + f"[{100 * number // len(checks):3d}%]")
    print()
    if failures:
        print("=" * 28 + " short test summary info " + "=" * 24)
        for line in failures:
            print(line)
    passed = len(checks) - len(failures)
    print("=" * 30 + f" {len(failures)} failed, {passed} passed " + "=" * 30)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
'''

MONEY = '''\
"""Money in integer cents: parsing, formatting, allocation.

Amounts are kept in cents so that sums are exact; only `fmt_cents` turns them back into text.
"""


def to_cents(amount):
    """'12.34' -> 1234; a leading minus and at most two decimals are accepted."""
    text = amount.strip().replace(",", "")
    sign = -1 if text.startswith("-") else 1
    whole, _, frac = text.lstrip("-").partition(".")
    if len(frac) > 2:
        raise ValueError(f"more than two decimals: {amount!r}")
    return sign * (int(whole or "0") * 100 + int((frac + "00")[:2]))


def fmt_cents(cents):
    """1234 -> '12.34'; negative amounts keep their sign."""
    sign = "-" if cents < 0 else ""
    cents = abs(cents)
    return f"{sign}{cents // 100}.{cents % 100:02d}"


def allocate(total, weights):
    """Split `total` cents in proportion to `weights`; the shares add up to `total` exactly."""
    whole = sum(weights)
    if whole <= 0:
        raise ValueError("weights must add up to a positive number")
    shares = [round(total * w / whole) for w in weights]
    return shares  # proportional shares


def percent(part, whole):
    """The share of `part` in `whole`, in percent with one decimal."""
    return round(100 * part / whole, 1) if whole else 0.0
'''

DATES = '''\
"""Calendar helpers for accounting periods (ISO dates as (year, month, day) tuples)."""

MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def is_leap(year):
    """Gregorian leap years."""
    return year % 4 == 0 and year % 100 != 0


def days_in_month(year, month):
    if not 1 <= month <= 12:
        raise ValueError(f"no month {month}")
    return 29 if month == 2 and is_leap(year) else MONTH_DAYS[month - 1]


def month_end(year, month):
    return (year, month, days_in_month(year, month))


def quarter(month):
    return (month - 1) // 3 + 1


def next_month(year, month):
    return (year + 1, 1) if month == 12 else (year, month + 1)
'''

FIXES_FULL = (
    ("ledger/money.py", "    return shares  # proportional shares",
     "    shares[-1] += total - sum(shares)  # rounding drift goes to the last share\n    return shares"),
    ("ledger/dates.py", "    return year % 4 == 0 and year % 100 != 0",
     "    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)"),
)

# Modules without planted bugs: name -> source. Short, real code the tests exercise.
MODULES = {
    "accounts": '''\
"""Accounts of a chart: a code, a name, a kind and a running balance in cents."""

KINDS = ("asset", "liability", "equity", "income", "expense")
DEBIT_NORMAL = ("asset", "expense")


class Account:
    def __init__(self, code, name, kind):
        if kind not in KINDS:
            raise ValueError(f"unknown account kind {kind!r}")
        self.code, self.name, self.kind = code, name, kind
        self.balance = 0

    def post(self, debit=0, credit=0):
        """Apply one posting; the sign follows the account's normal side."""
        delta = debit - credit
        self.balance += delta if self.kind in DEBIT_NORMAL else -delta
        return self.balance

    def __repr__(self):
        return f"Account({self.code!r}, {self.name!r}, {self.kind!r}, balance={self.balance})"


def chart(rows):
    """Build {code: Account} from (code, name, kind) rows; duplicate codes are an error."""
    accounts = {}
    for code, name, kind in rows:
        if code in accounts:
            raise ValueError(f"duplicate account code {code}")
        accounts[code] = Account(code, name, kind)
    return accounts
''',
    "journal": '''\
"""Journal entries: balanced sets of postings, applied to a chart of accounts."""

from ledger.accounts import chart


class Entry:
    def __init__(self, date, memo, lines):
        self.date, self.memo, self.lines = date, memo, list(lines)

    @property
    def debits(self):
        return sum(d for _, d, _ in self.lines)

    @property
    def credits(self):
        return sum(c for _, _, c in self.lines)

    def balanced(self):
        return self.debits == self.credits


def post_all(rows, entries):
    """Apply entries to a fresh chart; unbalanced entries are refused, not half-applied."""
    accounts = chart(rows)
    for entry in entries:
        if not entry.balanced():
            raise ValueError(f"unbalanced entry {entry.memo!r}: {entry.debits} != {entry.credits}")
        for code, debit, credit in entry.lines:
            accounts[code].post(debit, credit)
    return accounts
''',
    "reports": '''\
"""Plain-text reports: trial balance and account listings."""

from ledger.money import fmt_cents


def trial_balance(accounts):
    """One line per account plus a total line; debit-normal balances on the left."""
    lines, left, right = [], 0, 0
    for code in sorted(accounts):
        acc = accounts[code]
        if acc.kind in ("asset", "expense"):
            left += acc.balance
            lines.append(f"{code:<6}{acc.name:<24}{fmt_cents(acc.balance):>12}")
        else:
            right += acc.balance
            lines.append(f"{code:<6}{acc.name:<24}{'':>12}{fmt_cents(acc.balance):>12}")
    lines.append(f"{'':<30}{fmt_cents(left):>12}{fmt_cents(right):>12}")
    return "\\n".join(lines)
''',
    "parse": '''\
"""Parsing bank-statement CSV lines: date;memo;amount."""

from ledger.money import to_cents


def parse_line(line):
    date, memo, amount = (part.strip() for part in line.split(";"))
    year, month, day = (int(p) for p in date.split("-"))
    return (year, month, day), memo, to_cents(amount)


def parse_lines(lines):
    """Skip blank lines and comments (#); everything else must parse."""
    return [parse_line(line) for line in lines if line.strip() and not line.lstrip().startswith("#")]
''',
    "fmt": '''\
"""Small text formatting helpers for reports."""


def pad(text, width, align="<"):
    return f"{text:{align}{width}}"[:width]


def table(rows, widths):
    return "\\n".join("".join(pad(str(c), w) for c, w in zip(row, widths)).rstrip() for row in rows)


def plural(n, word):
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
''',
    "tax": '''\
"""Value-added tax on amounts in cents, rounded half up per line."""

RATES = {"standard": 20, "reduced": 5, "zero": 0}


def vat(net, rate="standard"):
    return (net * RATES[rate] + 50) // 100


def gross(net, rate="standard"):
    return net + vat(net, rate)
''',
    "currency": '''\
"""Conversion between currencies with a fixed rate table (rates per 1 EUR, in ten-thousandths)."""

RATES = {"EUR": 10000, "USD": 10850, "GBP": 8560, "CHF": 9620}


def convert(cents, source, target):
    """Convert via EUR; rounds half up to whole cents."""
    eur = cents * 10000 / RATES[source]
    return int(eur * RATES[target] / 10000 + 0.5)
''',
    "budget": '''\
"""Budget against actuals, per account code."""


def variance(budget, actual):
    """{code: actual - budget} for every code in either mapping."""
    return {code: actual.get(code, 0) - budget.get(code, 0) for code in sorted(set(budget) | set(actual))}


def over_budget(budget, actual):
    return [code for code, diff in variance(budget, actual).items() if diff > 0]
''',
    "cli": '''\
"""Command line: `python -m ledger.cli report FILE` prints a trial balance of a statement."""

import argparse
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(prog="ledger")
    parser.add_argument("command", choices=["report", "check"])
    parser.add_argument("path")
    args = parser.parse_args(argv)
    print(f"{args.command}: {args.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
''',
}

TESTS = {
    "money": '''\
from ledger.money import allocate, fmt_cents, percent, to_cents


def test_to_cents(text, cents):
    assert to_cents(text) == cents, f"to_cents({text!r}) = {to_cents(text)}"


test_to_cents.cases = [(f"{n}.{n % 100:02d}", n * 100 + n % 100) for n in range(0, 3000, 211)]


def test_fmt_cents(cents):
    assert to_cents(fmt_cents(cents)) == cents


test_fmt_cents.cases = [(n,) for n in range(-5000, 5000, 713)]


def test_allocate(total, parts):
    shares = allocate(total, [1] * parts)
    assert sum(shares) == total, f"allocate({total}, {parts} equal weights) adds up to {sum(shares)}"


test_allocate.cases = [(total, parts) for total in range(100, 1300, 150) for parts in (1, 2, 4, 6)]


def test_percent(part, whole):
    assert 0 <= percent(part, whole) <= 100


test_percent.cases = [(p, 97) for p in range(0, 97, 12)]
''',
    "dates": '''\
from ledger.dates import days_in_month, month_end, next_month, quarter


def test_days_in_month(year, month):
    expected = {2: 29 if year % 400 == 0 or (year % 4 == 0 and year % 100) else 28}.get(
        month, 30 if month in (4, 6, 9, 11) else 31)
    got = days_in_month(year, month)
    assert got == expected, f"days_in_month({year}, {month}) = {got}, expected {expected}"


test_days_in_month.cases = [(y, m) for y in (1900, 1996, 2000, 2023, 2024) for m in range(1, 13)]


def test_quarter(month):
    assert quarter(month) == (month + 2) // 3


test_quarter.cases = [(m,) for m in range(1, 13)]


def test_month_end(year):
    assert month_end(year, 12) == (year, 12, 31)


test_month_end.cases = [(y,) for y in range(2018, 2026)]


def test_next_month(month):
    assert next_month(2024, month)[1] == month % 12 + 1


test_next_month.cases = [(m,) for m in range(1, 13)]
''',
    "accounts": '''\
from ledger.accounts import Account, chart


def test_post(kind, debit, credit):
    acc = Account("1000", "Cash", kind)
    sign = 1 if kind in ("asset", "expense") else -1
    assert acc.post(debit, credit) == sign * (debit - credit)


test_post.cases = [(k, d, c) for k in ("asset", "liability", "income", "expense")
                   for d, c in ((100, 0), (0, 250), (75, 75))]


def test_chart_rejects_duplicates():
    try:
        chart([("1", "a", "asset"), ("1", "b", "asset")])
    except ValueError:
        return
    raise AssertionError("duplicate codes were accepted")
''',
    "journal": '''\
from ledger.journal import Entry, post_all

ROWS = [("1000", "Cash", "asset"), ("4000", "Sales", "income"), ("5000", "Rent", "expense")]


def test_balanced_sale(amount):
    accounts = post_all(ROWS, [Entry((2024, 1, 5), "sale", [("1000", amount, 0), ("4000", 0, amount)])])
    assert accounts["1000"].balance == amount and accounts["4000"].balance == amount


test_balanced_sale.cases = [(a,) for a in range(100, 2100, 250)]


def test_unbalanced_is_refused():
    try:
        post_all(ROWS, [Entry((2024, 1, 5), "bad", [("1000", 5, 0)])])
    except ValueError:
        return
    raise AssertionError("an unbalanced entry was posted")
''',
    "reports": '''\
from ledger.accounts import chart
from ledger.reports import trial_balance


def test_trial_balance_lines(n):
    accounts = chart([(str(1000 + i), f"Account {i}", "asset") for i in range(n)])
    assert len(trial_balance(accounts).splitlines()) == n + 1


test_trial_balance_lines.cases = [(n,) for n in range(1, 9)]
''',
    "parse": '''\
from ledger.parse import parse_line, parse_lines


def test_parse_line(day, cents):
    date, memo, amount = parse_line(f"2024-03-{day:02d}; coffee ; {cents // 100}.{cents % 100:02d}")
    assert date == (2024, 3, day) and memo == "coffee" and amount == cents


test_parse_line.cases = [(d, d * 137) for d in range(1, 29, 3)]


def test_comments_skipped():
    assert len(parse_lines(["# head", "", "2024-01-01;x;1.00"])) == 1
''',
    "fmt": '''\
from ledger.fmt import pad, plural


def test_pad(width):
    assert len(pad("ledger", width)) == width


test_pad.cases = [(w,) for w in range(1, 13)]


def test_plural(n):
    assert plural(n, "entry").startswith(str(n))


test_plural.cases = [(n,) for n in range(0, 5)]
''',
    "tax": '''\
from ledger.tax import gross, vat


def test_vat_standard(net):
    assert vat(net) == (net * 20 + 50) // 100


test_vat_standard.cases = [(n,) for n in range(0, 10000, 777)]


def test_gross(net):
    assert gross(net, "zero") == net


test_gross.cases = [(n,) for n in range(0, 1000, 99)]
''',
    "currency": '''\
from ledger.currency import convert


def test_round_trip(cents, target):
    back = convert(convert(cents, "EUR", target), target, "EUR")
    assert abs(back - cents) <= 1


test_round_trip.cases = [(c, t) for c in range(100, 5100, 700) for t in ("USD", "GBP", "CHF")]
''',
    "budget": '''\
from ledger.budget import over_budget, variance


def test_variance(extra):
    assert variance({"5000": 1000}, {"5000": 1000 + extra})["5000"] == extra


test_variance.cases = [(e,) for e in range(-300, 301, 75)]


def test_over_budget():
    assert over_budget({"5000": 10, "6000": 10}, {"5000": 11, "6000": 9}) == ["5000"]
''',
}

README = """# ledger

A small double-entry bookkeeping package: money in integer cents, calendar periods, accounts, journal
entries, VAT, currency conversion, budgets and plain-text reports.

Run the checks with `python3 run_tests.py` (no dependencies; prints one line per check).

Layout: `ledger/` the package, `tests/` the checks, `docs/` notes per area, `data/` sample statements,
`scripts/` maintenance helpers.
"""

DOCS = {
    "overview": "# Overview\n\nEvery amount is an integer number of cents. Entries must balance before "
                "they are posted; `journal.post_all` refuses unbalanced entries instead of applying half of "
                "them.\n\nModules: money (cents, allocation), dates (periods), accounts, journal, reports, "
                "parse, fmt, tax, currency, budget, cli.\n",
    "money": "# Money\n\n`allocate(total, weights)` splits an amount in proportion to weights. The shares "
             "must add up to the total exactly: invoices are split this way and a lost cent is a bug.\n",
    "dates": "# Dates\n\nGregorian calendar: a year is a leap year when divisible by 4, except centuries, "
             "except every fourth century (2000 was a leap year, 1900 was not).\n",
    "reports": "# Reports\n\n`trial_balance(accounts)` prints one line per account and a total line.\n",
    "changelog": "# Changelog\n\n1.4 allocation by weights; 1.3 currency table; 1.2 VAT rates; "
                 "1.1 budgets.\n",
}

SCRIPTS = {
    "scripts/release.py": '"""Bumps the version in setup.cfg."""\nimport sys\n\nprint("release", sys.argv)\n',
    "scripts/lint.sh": "#!/bin/sh\n# Runs the style checks.\npython3 -m pyflakes ledger tests\n",
    "scripts/make_sample.py": ('"""Writes a sample statement to data/."""\n'
                               'for i in range(3):\n    print(f"2024-01-{i + 1:02d};sample;{i}.00")\n'),
}

SURVEY_READS = ("README.md", "run_tests.py", "docs/overview.md", "ledger/__init__.py", "ledger/money.py",
                "ledger/dates.py", *(f"ledger/{name}.py" for name in MODULES))
"""What a survey reads, in this order (three per assistant message): the docs, the runner, every module."""


def _statement(seed: int) -> str:
    rows = [f"2024-{seed:02d}-{day:02d};{memo};{(day * 37 + seed * 11) % 400}.{day * 7 % 100:02d}"
            for day, memo in zip(range(1, 29, 3), ("rent", "coffee", "sale", "refund", "fee", "sale", "tax",
                                                     "sale", "bank", "misc"))]
    return "# date;memo;amount\n" + "\n".join(rows) + "\n"


def _files(tiny: bool) -> dict[str, str]:
    if tiny:
        money_tests = TESTS["money"]
        return {"README.md": README, "run_tests.py": RUN_TESTS, "ledger/__init__.py": '"""ledger."""\n',
                "ledger/money.py": MONEY, "tests/test_money.py": money_tests}
    files = {"README.md": README, "run_tests.py": RUN_TESTS, ".gitignore": "__pycache__/\n",
             "setup.cfg": "[metadata]\nname = ledger\nversion = 1.4\n",
             "pyproject.toml": '[build-system]\nrequires = ["setuptools"]\n',
             "ledger/__init__.py": '"""ledger: bookkeeping in integer cents."""\n__version__ = "1.4"\n',
             "ledger/money.py": MONEY, "ledger/dates.py": DATES}
    files.update({f"ledger/{name}.py": body for name, body in MODULES.items()})
    files.update({f"tests/test_{name}.py": body for name, body in TESTS.items()})
    files.update({f"docs/{name}.md": body for name, body in DOCS.items()})
    files.update({f"data/statement-2024-{m:02d}.csv": _statement(m) for m in range(1, 6)})
    files.update(SCRIPTS)
    return files


FIXES = {False: FIXES_FULL, True: FIXES_FULL[:1]}
"""The repairing edits, by `tiny`."""


def make_repo(root: Path, tiny: bool = False) -> Path:
    """Write the repository under `root` and commit it; returns `root`."""
    root.mkdir(parents=True, exist_ok=True)
    for name, body in _files(tiny).items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(body) if name.endswith(".md") else body)
    git = ["git", "-c", "user.name=flower bench", "-c", "user.email=bench@flower.invalid"]
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "."], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "ledger 1.4"], cwd=root, check=True)
    return root


def run_suite(root: Path) -> tuple[int, str]:
    """Run the repository's test script directly: (exit code, output)."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}  # leave no __pycache__ for a later `find` to list
    done = subprocess.run(["python3", "run_tests.py"], cwd=root, capture_output=True, text=True, check=False,
                          env=env)
    return done.returncode, done.stdout + done.stderr
