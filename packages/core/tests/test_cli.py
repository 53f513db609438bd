"""The eosink command's own behaviour, on a sink made for the test (sinks' hooks: tests/)."""

from __future__ import annotations

import json

import attrs
import pytest

from eosink import cli
from eosink.plugin import Proof, hookimpl
from eosink.base import Sink
from eosink.reports import CleanupReport, Leftover, TargetStatus, Verification


@attrs.frozen
class ToyOptions:
    path: str
    broken: bool = False


class ToySink(Sink):
    """Answers status and verify; has no cleanup (third-party sinks may skip hooks)."""

    name = "toy"
    Options = ToyOptions

    @hookimpl
    def target_status(self):
        proof = Proof("orders", 7, rows=10, committed_at=0.0)
        return TargetStatus(self.options.path, (proof,), {"open_transactions": []})

    @hookimpl
    def verify_target(self):
        problems = ("missing: part-1",) if self.options.broken else ()
        return Verification(self.options.path, 3, problems)


class CleaningSink(ToySink):
    @hookimpl
    def cleanup_target(self, older_than_s, delete):
        return CleanupReport(
            self.options.path, (Leftover("part-9", "orphan file", 5, older_than_s + 1),), (), delete
        )


@pytest.fixture(autouse=True)
def toy(monkeypatch):
    sinks = {"toy": ToySink, "cleaning": CleaningSink}
    monkeypatch.setattr(cli, "sink_from_options", lambda name, o: sinks[name].from_options(o))


@pytest.mark.parametrize("command", [[], ["sinks"], ["status"], ["verify"], ["cleanup"]])
def test_every_command_has_help_with_an_example(command, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main([*command, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "example" in out and "eosink " in out.split("example", 1)[1]


def test_status_prints_a_table_and_json(capsys):
    assert cli.main(["status", "toy", "/data/t"]) == 0
    out = capsys.readouterr().out
    assert "orders" in out and "7" in out and "open transactions: []" in out
    assert cli.main(["status", "toy", "/data/t", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["writers"][0]["batch_id"] == 7 and data["target"] == "/data/t"


def test_verify_exit_codes(capsys):
    assert cli.main(["verify", "toy", "/data/t"]) == 0
    assert cli.main(["verify", "toy", "/data/t", "-o", "broken=true", "--json"]) == 1
    out = capsys.readouterr().out
    assert json.loads(out[out.index("{") :])["ok"] is False


def test_cleanup_is_a_dry_run_unless_delete(capsys):
    assert cli.main(["cleanup", "cleaning", "/t", "--older-than", "2h"]) == 0
    out = capsys.readouterr().out
    assert "would remove 1 leftover(s)" in out and "--delete" in out
    assert cli.main(["cleanup", "cleaning", "/t", "--delete", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["deleted"] is True and data["removable"][0]["age_s"] == 24 * 3600 + 1


def test_a_missing_hook_is_named(capsys):
    assert cli.main(["cleanup", "toy", "/t"]) == 2
    assert "does not support `eosink cleanup`" in capsys.readouterr().err


def test_unknown_options_are_the_sinks_error(capsys):
    assert cli.main(["status", "toy", "/t", "--proxy", "yt"]) == 2
    assert "unknown option 'proxy'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "seconds"), [("90", 90), ("90s", 90), ("15m", 900), ("2d", 172800)]
)
def test_durations(text, seconds):
    assert cli.duration(text) == seconds
