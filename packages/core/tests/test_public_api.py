"""The public API's split: what pipeline authors call (``eosink``), what sink authors implement
against (``eosink.plugin``), and the old spellings that keep working, with a warning, for one
release."""

import importlib
import inspect
import warnings

import pytest

import eosink
import eosink.plugin
import eosink.spark
import eosink.testing

USER_API = {
    "BatchOutcome",
    "CheckpointMismatchError",
    "ConfigurationError",
    "EosinkError",
    "MissingWriterIdError",
    "ReplayMismatchError",
    "SinkError",
    "UnknownSinkError",
    "configure_logging",
    "foreach_batch",
    "installed_sinks",
    "register_data_sources",
    "sink",
    "write_batch",
}

#: What ``eosink.spark`` exports: the front doors users call (``foreach_batch``, ``write_batch``,
#: ``register``) and what sink authors drive Spark's writers with.
SPARK_API = {
    "StagedFile",
    "StagedFiles",
    "foreach_batch",
    "is_classic",
    "register",
    "session_conf",
    "stage_dataframe",
    "write_batch",
}

#: Internals of ``eosink.spark`` that its ``__all__`` once listed, and the module each lives in.
SPARK_INTERNALS = {
    "ForeachBatchWriter": "eosink.spark.foreach_batch",
    "MICROS_TIMESTAMPS": "eosink.spark.session",
}

#: What ``eosink.__all__`` held before the split, and where each name lives now.
MOVED = {
    "AlreadyCommitted": "eosink.plugin",
    "BatchContext": "eosink.plugin",
    "PartitionGroups": "eosink.plugin",
    "Proof": "eosink.plugin",
    "Sink": "eosink.plugin",
    "Staged": "eosink.plugin",
    "crash_point": "eosink.plugin",
    "group_by_text": "eosink.plugin",
    "hookimpl": "eosink.plugin",
    "java_number_text": "eosink.plugin",
    "options_from": "eosink.plugin",
    "run_batch": "eosink.testing",
    "Fingerprint": "eosink.model",
    "PartitionResult": "eosink.model",
    "PhaseLogger": "eosink.logs",
    "WriteTask": "eosink.protocol",
    "hookspec": "eosink.hookspecs",
    "sink_from_options": "eosink.registry",
}


def test_eosink_exports_the_user_api_only():
    assert set(eosink.__all__) == USER_API
    for name in eosink.__all__:
        assert getattr(eosink, name) is not None


def test_eosink_spark_exports_the_front_doors_and_the_sink_authors_helpers_only():
    assert set(eosink.spark.__all__) == SPARK_API
    for name in eosink.spark.__all__:
        assert getattr(eosink.spark, name) is not None


@pytest.mark.parametrize(("name", "module"), sorted(SPARK_INTERNALS.items()))
def test_eosink_spark_internals_stay_importable_from_their_modules(name, module):
    assert name not in eosink.spark.__all__
    assert getattr(importlib.import_module(module), name) is not None


def test_the_user_api_is_unchanged_apart_from_what_moved():
    assert not set(MOVED) & USER_API


@pytest.mark.parametrize("name", sorted(eosink.plugin.__all__))
def test_the_sink_authors_namespace_names_and_documents_everything_it_exports(name):
    assert getattr(eosink.plugin, name) is not None
    assert name in (eosink.plugin.__doc__ or ""), f"eosink.plugin's guide does not mention {name}"


def test_the_user_errors_a_sink_raises_are_the_same_classes_in_both_namespaces():
    for name in ("ConfigurationError", "EosinkError", "SinkError"):
        assert getattr(eosink, name) is getattr(eosink.plugin, name)


def test_run_batch_is_in_the_testing_kit():
    from eosink.protocol import run_batch

    assert eosink.testing.run_batch is run_batch


@pytest.mark.parametrize("name", sorted(MOVED))
def test_an_old_spelling_still_works_and_warns_with_the_new_import(name):
    expected = getattr(importlib.import_module(MOVED[name]), name)
    with pytest.warns(DeprecationWarning, match=rf"use `from {MOVED[name]} import {name}`"):
        assert getattr(eosink, name) is expected


def test_an_old_from_import_warns_at_the_importing_line():
    namespace: dict = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(compile("from eosink import Proof, sink", "old_sink.py", "exec"), namespace)
    assert namespace["Proof"] is eosink.plugin.Proof
    assert namespace["sink"] is eosink.sink  # the user API itself does not warn
    assert caught and {w.category for w in caught} == {DeprecationWarning}
    assert {w.filename for w in caught} == {"old_sink.py"}
    assert "eosink.Proof is deprecated" in str(caught[0].message)
    assert "from eosink.plugin import Proof" in str(caught[0].message)


def test_the_user_api_and_submodules_import_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from eosink import clock, foreach_batch, plugin  # noqa: F401

        for name in eosink.__all__:
            getattr(eosink, name)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        eosink.no_such_name  # noqa: B018


def test_the_sink_authors_namespace_is_the_documented_entry_point():
    doc = inspect.getdoc(eosink.plugin) or ""
    assert "eosink.hookspecs" in doc and "docs/hooks.md" in doc
    assert "eosink.plugin" in (inspect.getdoc(eosink) or "")
