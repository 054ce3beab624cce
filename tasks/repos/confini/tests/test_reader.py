import pytest

from confini import Config, ConfigError, InterpolationError, ParseError

SAMPLE = """
[DEFAULT]
root = /srv/app

[server]
host = 0.0.0.0
port = 8080   ; http
debug = yes
logs = ${root}/logs
price = $$5

[client]
url = http://${server:host}:${server:port}
name = "  padded  "
"""


@pytest.fixture
def cfg():
    return Config.from_string(SAMPLE)


def test_sections(cfg):
    assert cfg.sections() == ["server", "client"]


def test_get_string(cfg):
    assert cfg.get("server", "host") == "0.0.0.0"


def test_get_int(cfg):
    assert cfg.get_int("server", "port") == 8080


def test_get_bool(cfg):
    assert cfg.get_bool("server", "debug") is True


def test_quoted_value_keeps_inner_spaces(cfg):
    assert cfg.get("client", "name") == "  padded  "


def test_default_section_inherited(cfg):
    assert cfg.get("client", "root") == "/srv/app"
    assert "root" in cfg.options("server")


def test_interpolation_same_section_and_default(cfg):
    assert cfg.get("server", "logs") == "/srv/app/logs"


def test_interpolation_other_section(cfg):
    assert cfg.get("client", "url") == "http://0.0.0.0:8080"


def test_dollar_escape(cfg):
    assert cfg.get("server", "price") == "$5"


def test_raw_get(cfg):
    assert cfg.get("server", "logs", raw=True) == "${root}/logs"


def test_unknown_reference():
    cfg = Config.from_string("[a]\nx = ${nope}\n")
    with pytest.raises(InterpolationError, match="nope"):
        cfg.get("a", "x")


def test_missing_option_uses_default(cfg):
    assert cfg.get_int("server", "workers", default=4) == 4


def test_missing_option_raises(cfg):
    with pytest.raises(ConfigError, match="workers"):
        cfg.get("server", "workers")


def test_missing_section_raises(cfg):
    with pytest.raises(ConfigError, match="no section"):
        cfg.get("database", "host")


def test_section_names_case_insensitive(cfg):
    assert cfg.get("SERVER", "host") == "0.0.0.0"


def test_has_option(cfg):
    assert cfg.has_option("server", "port")
    assert not cfg.has_option("server", "workers")
    assert not cfg.has_option("nosuch", "port")


def test_option_before_section():
    with pytest.raises(ParseError, match="before any"):
        Config.from_string("x = 1\n[a]\n")


def test_get_list_commas():
    cfg = Config.from_string("[a]\nitems = one, two, three\n")
    assert cfg.get_list("a", "items") == ["one", "two", "three"]


def test_from_file(tmp_path):
    path = tmp_path / "app.ini"
    path.write_text("[a]\nx = 1\n")
    assert Config.from_file(path).get_int("a", "x") == 1
