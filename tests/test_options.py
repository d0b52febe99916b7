"""One set of server defaults: the Rust server's, read by ``ServerOptions``, used by ``serve_oai``
and by ``smgpy serve``'s flags (which depart from it only in ``--default-max-tokens``, on purpose)."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest
import smgpy
from smgpy import ServerOptions, _native
from smgpy.cli import build_parser
from smgpy.options import CLI_DEFAULT_MAX_TOKENS


def test_server_options_defaults_are_the_rust_servers() -> None:
    d = ServerOptions()
    rust = _native.server_defaults()
    assert rust, "the Rust server lists no defaults"
    for name, value in rust.items():
        assert getattr(d, name) == value, name
    # The documented values, so a change to them is a visible decision.
    assert (d.request_timeout, d.response_store_ttl, d.max_body_bytes) == (1800.0, 30 * 86400.0, 32 << 20)
    assert (d.default_max_tokens, d.tool_parser, d.http_threads) == (None, "auto", 1)


def test_smgpy_serve_flags_default_to_the_same_options(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["serve"])
    d = ServerOptions()
    assert args.request_timeout == d.request_timeout
    assert args.header_read_timeout == d.header_read_timeout
    assert args.body_read_timeout == d.body_read_timeout
    assert args.max_connections == d.max_connections
    assert args.max_connections_per_client == d.max_connections_per_client
    assert args.max_body_bytes == d.max_body_bytes
    assert args.response_store_bytes == d.response_store_bytes
    assert args.response_store_ttl == d.response_store_ttl
    assert args.shutdown_timeout == d.shutdown_timeout
    assert args.http_threads == d.http_threads
    assert args.log_level == d.log_level
    # The one deliberate difference: an operator's server caps a request's tokens.
    assert args.default_max_tokens == CLI_DEFAULT_MAX_TOKENS and d.default_max_tokens is None
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "(0: no limit) (default 1800)" in shown and "(default 32M)" in shown and "(default 30d)" in shown
    assert "--max-body-size MAX_BODY_SIZE" in shown


def test_the_mlx_engine_and_its_flags_share_one_set_of_defaults() -> None:
    """``smgpy serve``'s engine flags and ``MLXEngine``'s keyword arguments default alike."""
    pytest.importorskip("mlx.core")
    import inspect

    from smgpy.mlx import MLXEngine
    from smgpy.options import MLX_DEFAULTS

    params = inspect.signature(MLXEngine.__init__).parameters
    args = build_parser().parse_args(["serve"])
    for f in dataclasses.fields(MLX_DEFAULTS):
        value = getattr(MLX_DEFAULTS, f.name)
        assert params[f.name].default == value, f.name
        assert getattr(args, f.name) == value, f.name
    # The documented values (as mlx_lm.server where it has them).
    assert (MLX_DEFAULTS.max_running, MLX_DEFAULTS.prefill_step_size, MLX_DEFAULTS.kv_group_size) == (32, 512, 64)


def test_serve_oai_refuses_an_unknown_option_by_name() -> None:
    class Engine:
        async def generate_request(self, obj: object) -> None: ...
        def abort_request(self, rid: str) -> None: ...

    with pytest.raises(TypeError, match="unknown option\\(s\\) 'request_timout'.*request_timeout"):
        asyncio.run(smgpy.serve_oai_async(Engine(), port=0, request_timout=5))
    with pytest.raises(TypeError, match="'max_body'"):
        smgpy.serve_oai(Engine(), port=0, max_body=1)


def test_options_are_immutable_and_replaced_by_keyword(tmp_path: Path) -> None:
    template = tmp_path / "t.jinja"
    template.write_text("{{ messages[0]['content'] }}")
    o = ServerOptions(chat_template=str(template), api_key="k")
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.api_key = "other"  # type: ignore[misc]
    assert o.read_template() == "{{ messages[0]['content'] }}"
    assert ServerOptions(chat_template="{{ x }}").read_template() == "{{ x }}"
    assert dataclasses.replace(o, request_timeout=None).request_timeout is None
    assert "request_timeout" in ServerOptions.names() and "log_level" in ServerOptions.names()
