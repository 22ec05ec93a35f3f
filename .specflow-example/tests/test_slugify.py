import pytest

from textkit import slugify


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        ("Hello, World!", "hello-world"),
        ("  Spaces   everywhere  ", "spaces-everywhere"),
        ("Crème brûlée à la carte", "creme-brulee-a-la-carte"),
        ("Version 2.0 -- released", "version-2-0-released"),
        ("", ""),
        ("!!!", ""),
    ],
)
def test_slugify(title, expected):
    assert slugify(title) == expected


def test_custom_separator():
    assert slugify("Snake Case Me", separator="_") == "snake_case_me"


def test_max_length_never_ends_with_separator():
    assert slugify("The quick brown fox", max_length=10) == "the-quick"
