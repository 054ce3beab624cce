"""Tasks for tasks/repos/texttable (see tasks/build_suite.py for the format)."""

TASKS = [
    dict(
        number=1,
        difficulty="easy",
        summary="thousands grouping puts a comma after the minus sign (-,123,456)",
        created_at="2024-06-03T09:30:00Z",
        problem_statement='''
Stray comma in negative numbers with thousands=True

```python
>>> from texttable import Table, format_cell
>>> format_cell(-123456, thousands=True)
'-,123,456'
>>> print(Table(["delta"], [[-999999.5]], floatfmt=".1f", thousands=True).render())
+-------------+
| delta       |
+-------------+
| -,999,999.5 |
+-------------+
```

Expected `'-123,456'` and `-999,999.5`. It only happens when the number of digits
before the decimal point is a multiple of three; `-1234` correctly gives `-1,234`.
''',
        fix=[
            (
                "texttable/formats.py",
                '    integer, dot, fraction = number_text.partition(".")\n    groups = []\n',
                '    integer, dot, fraction = number_text.partition(".")\n'
                '    sign = integer[:1] if integer[:1] in "+-" else ""\n'
                "    integer = integer[len(sign) :]\n"
                "    groups = []\n",
            ),
            (
                "texttable/formats.py",
                '    return ",".join(groups) + dot + fraction\n',
                '    return sign + ",".join(groups) + dot + fraction\n',
            ),
        ],
        tests={
            "tests/test_formats.py": '''
def test_group_thousands_negative_multiple_of_three_digits():
    assert group_thousands("-123456") == "-123,456"
    assert group_thousands("-999999.5") == "-999,999.5"
    assert group_thousands("-123") == "-123"
    assert format_cell(-123456, thousands=True) == "-123,456"
''',
            "tests/test_table.py": '''
def test_negative_thousands_in_table():
    lines = Table(["delta"], [[-999999.5]], floatfmt=".1f", thousands=True).render().splitlines()
    assert lines[3] == "| -999,999.5 |"
''',
        },
    ),
    dict(
        number=2,
        difficulty="medium",
        summary="text with combining accents (decomposed 'é') breaks the table's alignment",
        created_at="2024-06-07T14:00:00Z",
        problem_statement='''
Rows with accented names are one column short

Names coming from macOS file systems are in decomposed Unicode form (NFD): `é` is `e`
followed by U+0301 COMBINING ACUTE ACCENT. Such rows are misaligned:

```python
>>> from texttable import Table, display_width
>>> print(Table(["name", "city"], [["Zoe", "Cafe\\u0301 Paris"], ["Al", "Rome"]]).render())
+------+-------------+
| name | city        |
+------+-------------+
| Zoe  | Café Paris |
| Al   | Rome        |
+------+-------------+
>>> display_width("e\\u0301")
2
```

Expected the column to be 10 wide with all `|` lined up, and `display_width("e\\u0301")`
to be 1: the README says combining marks take no columns.
''',
        fix=[
            (
                "texttable/width.py",
                '    """Columns a character occupies in a terminal: 2 for East Asian wide characters."""\n',
                '    """Columns a character occupies in a terminal: 2 for East Asian wide characters,\n'
                '    0 for combining marks."""\n'
                "    if unicodedata.combining(char):\n"
                "        return 0\n",
            )
        ],
        tests={
            "tests/test_width.py": '''
def test_combining_marks_take_no_columns():
    assert display_width("e\\u0301") == 1
    assert display_width("Cafe\\u0301") == 4
    assert pad("e\\u0301", 3) == "e\\u0301  "
''',
            "tests/test_table.py": '''
def test_decomposed_accents_stay_aligned():
    lines = Table(["name", "city"], [["Zoe", "Cafe\\u0301 Paris"], ["Al", "Rome"]]).render()
    assert lines.splitlines() == [
        "+------+------------+",
        "| name | city       |",
        "+------+------------+",
        "| Zoe  | Cafe\\u0301 Paris |",
        "| Al   | Rome       |",
        "+------+------------+",
    ]
''',
        },
    ),
    dict(
        number=3,
        difficulty="medium",
        summary="headers with wide (CJK) characters are padded too much and misalign the table",
        created_at="2024-06-12T10:45:00Z",
        problem_statement='''
Japanese headers break the table layout

The body handles wide characters fine, but headers do not:

```python
>>> from texttable import Table
>>> print(Table(["名前", "年齢"], [["Ann", 30], ["Bob", 4]]).render())
+------+------+
| 名前   | 年齢   |
+------+------+
| Ann  |   30 |
| Bob  |    4 |
+------+------+
```

Expected the header row to line up with the rules:

```
+------+------+
| 名前 | 年齢 |
+------+------+
| Ann  |   30 |
| Bob  |    4 |
+------+------+
```
''',
        fix=[
            (
                "texttable/table.py",
                '        header = "| " + " | ".join(h.ljust(w) for h, w in zip(self.headers, widths)) + " |"\n',
                '        header = "| " + " | ".join(pad(h, w) for h, w in zip(self.headers, widths)) + " |"\n',
            )
        ],
        tests={
            "tests/test_table.py": '''
def test_wide_characters_in_headers():
    lines = Table(["名前", "年齢"], [["Ann", 30], ["Bob", 4]]).render().splitlines()
    assert lines == [
        "+------+------+",
        "| 名前 | 年齢 |",
        "+------+------+",
        "| Ann  |   30 |",
        "| Bob  |    4 |",
        "+------+------+",
    ]
''',
        },
    ),
    dict(
        number=4,
        difficulty="easy",
        summary="a numeric column containing None is left-aligned",
        created_at="2024-06-18T16:20:00Z",
        problem_statement='''
Missing values turn off right alignment of number columns

```python
>>> from texttable import Table
>>> print(Table(["name", "score"], [["ann", 10], ["bob", None], ["cy", 7]]).render())
+------+-------+
| name | score |
+------+-------+
| ann  | 10    |
| bob  |       |
| cy   | 7     |
+------+-------+
```

The README says empty cells (`None`) "do not change a column's alignment", so I expected
`score` to be right-aligned (`|    10 |`, `|     7 |`) as it is without the `None`.
A column that holds only `None` can stay left-aligned.
''',
        fix=[
            (
                "texttable/table.py",
                "            values = [row[column] for row in self.rows]\n",
                "            values = [row[column] for row in self.rows if row[column] is not None]\n",
            )
        ],
        tests={
            "tests/test_table.py": '''
def test_none_does_not_change_numeric_alignment():
    table = Table(["name", "score", "empty"], [["ann", 10, None], ["bob", None, None], ["cy", 7, None]])
    assert table.alignments() == ["<", ">", "<"]
    lines = table.render().splitlines()
    assert lines[3] == "| ann  |    10 |       |"
    assert lines[4] == "| bob  |       |       |"
''',
        },
    ),
    dict(
        number=5,
        difficulty="medium",
        summary="multi-line cells outside the first column lose every line after the first",
        created_at="2024-06-25T11:10:00Z",
        problem_statement='''
Multi-line values are cut off

```python
>>> from texttable import Table
>>> print(Table(["key", "value"], [["path", "/usr/bin\\n/usr/local/bin"], ["shell", "bash"]]).render())
+-------+----------------+
| key   | value          |
+-------+----------------+
| path  | /usr/bin       |
| shell | bash           |
+-------+----------------+
```

The column is sized for `/usr/local/bin`, but that line is never printed. The README
says "the row is as tall as its tallest cell". Expected:

```
+-------+----------------+
| key   | value          |
+-------+----------------+
| path  | /usr/bin       |
|       | /usr/local/bin |
| shell | bash           |
+-------+----------------+
```

Multi-line text in the first column works.
''',
        fix=[
            (
                "texttable/table.py",
                "            height = len(row[0]) if row else 1\n",
                "            height = max((len(lines) for lines in row), default=1)\n",
            )
        ],
        tests={
            "tests/test_table.py": '''
def test_multiline_cell_in_later_column():
    table = Table(["key", "value"], [["path", "/usr/bin\\n/usr/local/bin"], ["shell", "bash"]])
    assert table.render().splitlines()[3:6] == [
        "| path  | /usr/bin       |",
        "|       | /usr/local/bin |",
        "| shell | bash           |",
    ]
''',
        },
    ),
]
