import pytest

from texttable import Table


def test_readme_example():
    table = Table(["item", "qty", "price"], [["apple", 3, 0.5], ["pear", 12, 1.25]])
    assert table.render() == "\n".join(
        [
            "+-------+-----+-------+",
            "| item  | qty | price |",
            "+-------+-----+-------+",
            "| apple |   3 |   0.5 |",
            "| pear  |  12 |  1.25 |",
            "+-------+-----+-------+",
        ]
    )


def test_no_rows():
    assert Table(["a", "bb"], []).render() == "\n".join(
        ["+---+----+", "| a | bb |", "+---+----+", "+---+----+"]
    )


def test_auto_alignment():
    table = Table(["name", "n", "flag"], [["x", 1, True], ["y", 2.5, False]])
    assert table.alignments() == ["<", ">", "<"]


def test_explicit_alignment():
    table = Table(["a", "b"], [["x", "y"]], align=["^", ">"])
    assert table.render().splitlines()[3] == "| x | y |"


def test_rejects_bad_alignment():
    with pytest.raises(ValueError, match="align"):
        Table(["a"], [["x"]], align=["left"])


def test_rejects_ragged_rows():
    with pytest.raises(ValueError, match="row 1 has 1 cells"):
        Table(["a", "b"], [["x", "y"], ["z"]])


def test_none_rendered_blank():
    lines = Table(["a", "b"], [["x", None]]).render().splitlines()
    assert lines[3] == "| x |   |"


def test_wide_characters_in_body():
    lines = Table(["city", "n"], [["東京", 1], ["Oslo", 22]]).render().splitlines()
    assert lines[3] == "| 東京 |  1 |"
    assert lines[4] == "| Oslo | 22 |"


def test_multiline_cell_in_first_column():
    lines = Table(["a", "b"], [["one\ntwo", "x"]]).render().splitlines()
    assert lines[3:5] == ["| one | x |", "| two |   |"]


def test_floatfmt_and_thousands():
    lines = Table(["v"], [[1234.5]], floatfmt=".2f", thousands=True).render().splitlines()
    assert lines[3] == "| 1,234.50 |"


def test_str_is_render():
    table = Table(["a"], [["x"]])
    assert str(table) == table.render()
