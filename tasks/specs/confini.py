"""Tasks for tasks/repos/confini (see tasks/build_suite.py for the format)."""

TASKS = [
    dict(
        number=1,
        difficulty="easy",
        summary="get_bool rejects 'True'/'YES'/'Off': boolean words are compared case-sensitively",
        created_at="2024-03-04T10:00:00Z",
        problem_statement='''
get_bool fails on "True" and "YES"

Our config files are edited by people who write booleans in different styles:

```python
>>> from confini import Config
>>> cfg = Config.from_string("[feature]\\nenabled = True\\nbeta = YES\\nlegacy = Off\\n")
>>> cfg.get_bool("feature", "enabled")
Traceback (most recent call last):
  ...
ValueError: not a boolean: 'True' (use one of ('1', 'yes', 'true', 'on', '0', 'no', 'false', 'off'))
```

The README says booleans are accepted "in any letter case", so I expected `True` for
`enabled` and `beta` and `False` for `legacy`. Lower-case values work.
''',
        fix=[
            (
                "confini/values.py",
                "def to_bool(value):\n    if value in _TRUE:\n        return True\n    if value in _FALSE:\n",
                "def to_bool(value):\n    if value.lower() in _TRUE:\n        return True\n"
                "    if value.lower() in _FALSE:\n",
            )
        ],
        tests={
            "tests/test_values.py": '''
@pytest.mark.parametrize("text", ["True", "YES", "On", "TRUE"])
def test_true_values_any_case(text):
    assert to_bool(text) is True


@pytest.mark.parametrize("text", ["False", "NO", "Off"])
def test_false_values_any_case(text):
    assert to_bool(text) is False
''',
            "tests/test_reader.py": '''
def test_get_bool_mixed_case():
    cfg = Config.from_string("[feature]\\nenabled = True\\nbeta = YES\\nlegacy = Off\\n")
    assert cfg.get_bool("feature", "enabled") is True
    assert cfg.get_bool("feature", "beta") is True
    assert cfg.get_bool("feature", "legacy") is False
''',
        },
    ),
    dict(
        number=2,
        difficulty="easy",
        summary="get() with a mixed-case option name raises although has_option() finds it",
        created_at="2024-03-06T15:30:00Z",
        problem_statement='''
Option names are not case-insensitive in get()

The README says "Section and option names are case-insensitive", and `has_option`
agrees, but `get` does not:

```python
>>> from confini import Config
>>> cfg = Config.from_string("[server]\\nPort = 8080\\n")
>>> cfg.has_option("server", "Port")
True
>>> cfg.get("server", "Port")
Traceback (most recent call last):
  ...
confini.errors.ConfigError: no option 'Port' in section [server]
>>> cfg.get_int("server", "PORT")
Traceback (most recent call last):
  ...
confini.errors.ConfigError: no option 'PORT' in section [server]
```

Expected `'8080'` and `8080`. `cfg.get("server", "port")` works. The typed getters with a
default are affected too: `cfg.get_int("server", "Port", default=80)` silently returns 80.
''',
        fix=[
            (
                "confini/reader.py",
                "            value = self._raw(section, option)\n",
                "            value = self._raw(section, option.lower())\n",
            )
        ],
        tests={
            "tests/test_reader.py": '''
def test_option_names_case_insensitive():
    cfg = Config.from_string("[server]\\nPort = 8080\\n")
    assert cfg.get("server", "Port") == "8080"
    assert cfg.get_int("server", "PORT") == 8080
    assert cfg.get_int("Server", "port", default=80) == 8080
''',
        },
    ),
    dict(
        number=3,
        difficulty="medium",
        summary="quoted values containing ' #' or ' ;' are cut off as if they were comments",
        created_at="2024-03-11T08:45:00Z",
        problem_statement='''
Quoted value containing " #" is truncated

A password that contains a space followed by `#` is cut off, and the quote is left in
the value:

```python
>>> from confini import Config
>>> cfg = Config.from_string('[db]\\npassword = "hunter2 #1"\\nmotd = \\'lunch ; 12:00\\'   ; shown at login\\n')
>>> cfg.get("db", "password")
'"hunter2'
>>> cfg.get("db", "motd")
"'lunch"
```

Expected `'hunter2 #1'` and `'lunch ; 12:00'`. The README says quotes are removed "and
the text inside is kept as is", so a comment marker inside quotes should not start a
comment. A comment after the closing quote (like `; shown at login` above) should still
be dropped.
''',
        fix=[
            (
                "confini/lexer.py",
                '    """Remove a trailing \' # ...\' or \' ; ...\' comment from a value."""\n'
                "    for index, char in enumerate(text):\n"
                "        if char in _COMMENT_PREFIXES and (index == 0 or text[index - 1].isspace()):\n",
                '    """Remove a trailing \' # ...\' or \' ; ...\' comment from a value.\n'
                "\n"
                "    Comment markers inside single or double quotes are part of the value.\n"
                '    """\n'
                "    quote = None\n"
                "    for index, char in enumerate(text):\n"
                "        if quote:\n"
                "            if char == quote:\n"
                "                quote = None\n"
                "            continue\n"
                "        if char in \"\\\"'\":\n"
                "            quote = char\n"
                "        elif char in _COMMENT_PREFIXES and (index == 0 or text[index - 1].isspace()):\n",
            )
        ],
        tests={
            "tests/test_lexer.py": '''
def test_comment_marker_inside_quotes_kept():
    assert strip_inline_comment('"hunter2 #1"') == '"hunter2 #1"'
    assert strip_inline_comment("'lunch ; 12:00'   ; shown at login") == "'lunch ; 12:00'"
''',
            "tests/test_reader.py": '''
def test_quoted_values_with_comment_markers():
    cfg = Config.from_string(
        '[db]\\npassword = "hunter2 #1"\\nmotd = \\'lunch ; 12:00\\'   ; shown at login\\n'
    )
    assert cfg.get("db", "password") == "hunter2 #1"
    assert cfg.get("db", "motd") == "lunch ; 12:00"
''',
        },
    ),
    dict(
        number=4,
        difficulty="medium",
        summary="get_list on a multi-line value returns one item holding the line breaks",
        created_at="2024-03-14T13:10:00Z",
        problem_statement='''
get_list does not split multi-line values (README example fails)

The README example for lists written one per line does not work:

```python
>>> from confini import Config
>>> cfg = Config.from_string("[server]\\nhosts =\\n    alpha.internal\\n    beta.internal\\n")
>>> cfg.get_list("server", "hosts")
['alpha.internal\\nbeta.internal']
```

Expected `['alpha.internal', 'beta.internal']` ("Lists: items separated by commas or by
line breaks"). Mixing both should work as well, e.g.

```ini
[server]
ports = 80, 443
    8080
```

should give `['80', '443', '8080']`. Comma-separated values on a single line are fine.
''',
        fix=[
            (
                "confini/values.py",
                '    return [item.strip() for item in value.split(",") if item.strip()]\n',
                '    items = value.replace("\\n", ",").split(",")\n'
                "    return [item.strip() for item in items if item.strip()]\n",
            )
        ],
        tests={
            "tests/test_values.py": '''
def test_to_list_line_breaks_and_commas():
    assert to_list("a\\nb, c\\n\\nd") == ["a", "b", "c", "d"]
''',
            "tests/test_reader.py": '''
def test_get_list_multiline():
    cfg = Config.from_string(
        "[server]\\nhosts =\\n    alpha.internal\\n    beta.internal\\nports = 80, 443\\n    8080\\n"
    )
    assert cfg.get_list("server", "hosts") == ["alpha.internal", "beta.internal"]
    assert cfg.get_list("server", "ports") == ["80", "443", "8080"]
''',
        },
    ),
    dict(
        number=5,
        difficulty="hard",
        summary="nested ${...} references are returned unresolved; cycles must raise InterpolationError",
        created_at="2024-03-20T16:00:00Z",
        problem_statement='''
Interpolation stops after one level

When an option refers to another option that itself contains a reference, the inner
reference is left in the result:

```python
>>> from confini import Config
>>> cfg = Config.from_string("""
... [paths]
... root = /srv/app
... data = ${root}/data
... cache = ${data}/cache
...
... [worker]
... spool = ${paths:cache}/spool
... """)
>>> cfg.get("paths", "cache")
'${root}/data/cache'
>>> cfg.get("worker", "spool")
'${data}/cache/spool'
```

Expected `'/srv/app/data/cache'` and `'/srv/app/data/cache/spool'`: references should be
resolved all the way down, each in the context of the section its option lives in.

Please make sure that a reference cycle (for example `a = ${b}` and `b = ${a}`) raises
`confini.InterpolationError`, like an unknown reference does, instead of hanging or
blowing the stack.
''',
        fix=[
            (
                "confini/reader.py",
                "_REFERENCE = re.compile(",
                "MAX_INTERPOLATION_DEPTH = 10\n_REFERENCE = re.compile(",
            ),
            (
                "confini/reader.py",
                "    def _interpolate(self, section, value):\n",
                "    def _interpolate(self, section, value, depth=0):\n"
                "        if depth > MAX_INTERPOLATION_DEPTH:\n"
                "            raise InterpolationError(\n"
                "                f\"references nested deeper than {MAX_INTERPOLATION_DEPTH} in \"\n"
                "                f\"section [{section}] (is there a cycle?): {value!r}\"\n"
                "            )\n"
                "\n",
            ),
            (
                "confini/reader.py",
                "            try:\n"
                "                return self._raw(ref_section, ref_option.lower())\n"
                "            except (KeyError, ConfigError):\n"
                "                raise InterpolationError(\n"
                '                    f"cannot resolve {match.group(0)} in section [{section}]"\n'
                "                ) from None\n",
                "            try:\n"
                "                referenced = self._raw(ref_section, ref_option.lower())\n"
                "            except (KeyError, ConfigError):\n"
                "                raise InterpolationError(\n"
                '                    f"cannot resolve {match.group(0)} in section [{section}]"\n'
                "                ) from None\n"
                "            return self._interpolate(ref_section, referenced, depth + 1)\n",
            ),
        ],
        tests={
            "tests/test_reader.py": '''
NESTED = """
[DEFAULT]
base = /srv

[paths]
root = ${base}/app
data = ${root}/data
cache = ${data}/cache

[worker]
spool = ${paths:cache}/spool
"""


def test_nested_interpolation():
    cfg = Config.from_string(NESTED)
    assert cfg.get("paths", "cache") == "/srv/app/data/cache"
    assert cfg.get("worker", "spool") == "/srv/app/data/cache/spool"


def test_interpolation_cycle_raises():
    cfg = Config.from_string("[a]\\nx = ${y}\\ny = ${x}\\nz = ${z}\\n")
    with pytest.raises(InterpolationError):
        cfg.get("a", "x")
    with pytest.raises(InterpolationError):
        cfg.get("a", "z")
''',
        },
    ),
]
