"""German cardinal numbers in the built-in translation data: the generated spellings
agree with a speller written from the orthography's rules, not from num2words.

The rules (Duden; docs/translation.md):
1. Below a million a number is one word: [hundreds]hundert[units]und[tens] before "tausend",
   then the same for the last three digits ("dreihundertzwölftausendsiebenhundertdreiundzwanzig").
2. Units come before tens, joined by "und" ("zweiundvierzig"); 13–19 and the tens are fixed
   words (sechzehn, siebzehn, dreißig, sechzig, siebzig).
3. One is "ein" inside a word — before "und", "hundert" and "tausend" ("einundzwanzig",
   "einhundert", "einhunderteintausend"); "eins" only at the very end of the whole number
   ("einhunderteins"); "eine" before a feminine noun ("eine Million", "einhunderteine
   Millionen", as "tausendundeine Nacht").
4. Million, Milliarde, Billion, ... are nouns: capitalised, separate words, plural after any
   count but one ("zwei Millionen", "einundzwanzig Millionen").
5. Zero is "null" and stands alone. Hundred and thousand keep their "ein" ("einhundert").
"""
import pytest

from attnlab.data.numbers import german_cardinal_fix, spell

UNITS = ["", "ein", "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun"]
TEENS = ["zehn", "elf", "zwölf", "dreizehn", "vierzehn", "fünfzehn", "sechzehn", "siebzehn",
         "achtzehn", "neunzehn"]
TENS = ["", "", "zwanzig", "dreißig", "vierzig", "fünfzig", "sechzig", "siebzig", "achtzig",
        "neunzig"]
# 10^6, 10^9, ...: (singular, plural) — rule 4
SCALES = [("Million", "Millionen"), ("Milliarde", "Milliarden"), ("Billion", "Billionen"),
          ("Billiarde", "Billiarden"), ("Trillion", "Trillionen"), ("Trilliarde", "Trilliarden")]


def group(n: int) -> str:
    """1..999 with one as "ein" (rules 2, 3): the stem inside a longer word."""
    h, r = divmod(n, 100)
    u, t = r % 10, r // 10
    if r < 20:
        below = UNITS[r] if r < 10 else TEENS[u]
    else:
        below = (UNITS[u] + "und" if u else "") + TENS[t]
    return (UNITS[h] + "hundert" if h else "") + below


def german(n: int) -> str:
    """The number written out by rules 1–5."""
    if n == 0:
        return "null"
    words = []
    for k in range(len(SCALES), 0, -1):
        g = n // 1000 ** (k + 1) % 1000
        if g:
            one, many = SCALES[k - 1]
            words.append("eine " + one if g == 1 else
                         group(g) + ("e" if g % 100 == 1 else "") + " " + many)
    thousands, rest = n // 1000 % 1000, n % 1000
    last = (group(thousands) + "tausend" if thousands else "") + (group(rest) if rest else "")
    if last:
        words.append(last + ("s" if rest % 100 == 1 else ""))  # rule 3: "eins" at the end
    return " ".join(words)


def test_the_rules_speller_spells_the_textbook_examples():
    assert german(312_723) == "dreihundertzwölftausendsiebenhundertdreiundzwanzig"
    assert german(1_234_678_901) == ("eine Milliarde zweihundertvierunddreißig Millionen "
                                     "sechshundertachtundsiebzigtausendneunhunderteins")
    assert [german(n) for n in (1, 21, 100, 1000, 16, 70)] == [
        "eins", "einundzwanzig", "einhundert", "eintausend", "sechzehn", "siebzig"]


@pytest.mark.parametrize("number, words", [
    (101_000, "einhunderteintausend"),
    (301_158, "dreihunderteintausendeinhundertachtundfünfzig"),
    (1001, "eintausendeins"),
    (100_001, "einhunderttausendeins"),
    (201_001, "zweihunderteintausendeins"),
    (101_000_000, "einhunderteine Millionen"),
    (2_101_000, "zwei Millionen einhunderteintausend"),
    (901_000_000_000, "neunhunderteine Milliarden"),
])
def test_one_is_ein_inside_a_number_and_eins_only_at_its_end(number, words):
    assert spell(number, "de") == words == german(number)


@pytest.mark.slow
def test_every_group_of_three_digits_in_every_place_follows_the_rules():
    """Each value 0..999 of each group of three digits (with the groups beside it empty, one,
    or 101): the cases that make one a word ending differ only in the group they are in. The
    default range (below a million) is checked whole by the script in docs/translation.md."""
    numbers = {g * 1000**place + low for place in range(5) for g in range(1000)
               for low in (0, 1, 101_101 % 1000**place, 1000**place - 1)}
    wrong = [(n, spell(n, "de"), german(n)) for n in sorted(numbers) if spell(n, "de") != german(n)]
    assert not wrong, f"{len(wrong)} wrong, e.g. {wrong[:5]}"


def test_the_fix_changes_only_eins_that_is_not_the_end():
    assert german_cardinal_fix("einhunderteinstausendeins") == "einhunderteintausendeins"
    assert german_cardinal_fix("einhunderteins Millionen eins") == "einhunderteine Millionen eins"
    assert german_cardinal_fix("eins") == "eins"
    assert german_cardinal_fix("einundzwanzig") == "einundzwanzig"
