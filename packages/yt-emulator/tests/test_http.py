"""Wire-level behaviour of the proxy, through the real client's HTTP machinery."""

import json
import os

import pytest
import yt.wrapper as yw
from yt.wrapper import YtResponseError
from yt.wrapper.http_helpers import get_http_api_commands, make_request_with_retries

import eosink_yt_emulator


def test_api_v4_descriptors(yt_client):
    commands = get_http_api_commands(yt_client)
    path = os.path.join(os.path.dirname(eosink_yt_emulator.__file__), "commands_v4.json")
    with open(path) as f:
        expected = json.load(f)
    assert len(expected) == 150
    assert set(commands) == {d["name"] for d in expected}
    assert commands["write_table"].input_type == "tabular" and commands["write_table"].is_heavy


def test_method_per_descriptor(yt_emulator, yt_client):
    yt_client.exists("/")
    with pytest.raises(YtResponseError) as e:
        make_request_with_retries(
            "get", yt_emulator.url + "/api/v4/create", make_retries=False, client=yt_client
        )
    assert "must be requested with POST" in str(e.value)
    methods = {e["command"]: e["method"] for e in yt_emulator.requests}
    yt_client.set("//tmp/x", 1)
    yt_client.get("//tmp/x")
    yt_client.remove("//tmp/x")
    methods = {e["command"]: e["method"] for e in yt_emulator.requests}
    assert methods["set"] == "PUT" and methods["get"] == "GET" and methods["remove"] == "POST"


def test_error_headers_and_codes(yt_client):
    with pytest.raises(YtResponseError) as e:
        yt_client.get("//tmp/missing")
    err = e.value
    assert err.is_resolve_error()
    headers = err.attributes["response_headers"]
    assert headers["X-YT-Response-Code"] == "500"
    assert json.loads(headers["X-YT-Error"])["code"] == 500


def test_compressed_bodies(yt_emulator):
    yt = yt_emulator.client()
    yt.write_table("//tmp/t", [{"a": i} for i in range(100)])
    assert yt_emulator.requests.of("write_table")[-1]["content_encoding"] == "gzip"
    plain = yt_emulator.client(proxy={"content_encoding": "identity"})
    plain.write_table(yw.TablePath("//tmp/t", append=True), [{"a": 100}])
    assert yt_emulator.requests.of("write_table")[-1]["content_encoding"] == "identity"
    assert yt.row_count("//tmp/t") == 101


def test_framing_and_response_parameters(yt_emulator):
    yt = yt_emulator.client()
    yt.write_table("//tmp/t", [{"a": 1}, {"a": 2}])
    params = {}
    assert list(yt.read_table("//tmp/t", response_parameters=params)) == [{"a": 1}, {"a": 2}]
    assert params == {"start_row_index": 0, "approximate_row_count": 2}
    assert yt_emulator.requests.of("read_table")[-1]["framed"]


def test_json_structured_and_tabular_formats(yt_emulator):
    yt = yt_emulator.client(structured_data_format="json", tabular_data_format=yw.JsonFormat())
    yt.create(
        "table",
        "//tmp/t",
        attributes={"schema": [{"name": "s", "type": "string"}, {"name": "u", "type": "uint64"}]},
    )
    yt.set("//tmp/t/@note", "héllo")
    assert yt.get("//tmp/t/@note") == "héllo"
    yt.write_table("//tmp/t", [{"s": "wörld", "u": 5}])
    assert list(yt.read_table("//tmp/t")) == [{"s": "wörld", "u": 5}]
    with yt.Transaction():
        yt.set("//tmp/t/@x", [1, {"a": None}])
    assert yt.get("//tmp/t/@x") == [1, {"a": None}]
    assert yt_emulator.requests.of("set")[-1]["header_format"] == "json"
    assert str(yt_emulator.requests.of("get")[-1]["params"]["output_format"]) == "json"


def test_text_yson_tabular(yt_emulator):
    yt = yt_emulator.client(tabular_data_format=yw.YsonFormat(format="text"))
    yt.write_table("//tmp/t", [{"a": 1, "b": 2.5, "c": True, "d": None, "e": b"\xff"}])
    assert (
        list(yt.read_table("//tmp/t")) == [{"a": 1, "b": 2.5, "c": True, "d": None, "e": b"\xff"}]
        or list(yt.read_table("//tmp/t", format=yw.YsonFormat(format="text", encoding=None)))[0][
            b"e"
        ]
        == b"\xff"
    )


def test_discovery_endpoints(yt_emulator):
    yt = yt_emulator.client(proxy={"enable_proxy_discovery": True})
    yt.write_table("//tmp/t", [{"a": 1}])  # heavy command: the client discovers proxies via /hosts
    assert yt.row_count("//tmp/t") == 1
