"""The check digits that tell an identifier from any run of digits.

A card number, an IBAN or a national id number carries a checksum; a number that
fails it is an order number, a timestamp or a typo, and is left alone.  Each
function takes the text as written (spaces, dots, dashes included) and says
whether it is a valid identifier of its kind.
"""

from __future__ import annotations


def _digits(text: str) -> str:
    return "".join(c for c in text if c.isdigit())


def luhn(text: str) -> bool:
    """Whether the digits pass the Luhn check (ISO/IEC 7812: card numbers)."""
    total = 0
    for i, char in enumerate(reversed(_digits(text))):
        digit = int(char)
        if i % 2:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return total % 10 == 0


def iban(text: str) -> bool:
    """Whether ``text`` is an IBAN (ISO 13616): two letters, two check digits and up
    to 30 letters or digits, 15 to 34 in all, whose mod-97 remainder is 1."""
    compact = "".join(text.split()).upper()
    if not 15 <= len(compact) <= 34 or not compact[:2].isalpha() or not compact[2:4].isdigit():
        return False
    if not compact.isalnum() or not compact.isascii():
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


def br_cpf(text: str) -> bool:
    """Whether ``text`` is a Brazilian CPF: 11 digits, the last two check digits
    computed mod 11 with weights 10..2 and 11..2 (Receita Federal); a run of one
    digit repeated (``111.111.111-11``) passes the arithmetic but is not issued."""
    digits = [int(c) for c in _digits(text)]
    if len(digits) != 11 or len(set(digits)) == 1:
        return False
    for length in (9, 10):
        total = sum(d * w for d, w in zip(digits[:length], range(length + 1, 1, -1), strict=True))
        check = (total * 10) % 11 % 10
        if check != digits[length]:
            return False
    return True


_DNI_LETTERS = "TRWAGMYFPDXBNJZSQVHLCKE"


def es_dni(text: str) -> bool:
    """Whether ``text`` is a Spanish DNI (8 digits and a letter) or NIE (X, Y or Z,
    7 digits and a letter): the letter is the number mod 23 in ``TRWAGMY…``
    (NIE: X, Y, Z count as 0, 1, 2)."""
    compact = text.replace("-", "").replace(" ", "").upper()
    if len(compact) != 9 or not compact[-1].isalpha():
        return False
    head = compact[:-1]
    if head[0] in "XYZ":
        head = str("XYZ".index(head[0])) + head[1:]
    if not head.isdigit():
        return False
    return _DNI_LETTERS[int(head) % 23] == compact[-1]


def us_ssn(text: str) -> bool:
    """Whether ``text`` is a US social security number the SSA could issue: area not
    000, 666 or 9xx; group not 00; serial not 0000."""
    digits = _digits(text)
    if len(digits) != 9:
        return False
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"
