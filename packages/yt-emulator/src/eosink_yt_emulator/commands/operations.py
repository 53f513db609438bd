"""Operations (run at once, see ``operations.py``) and the service commands."""

from __future__ import annotations

from typing import Any

from ..errors import (
    YtError,
)
from ..yson import Uint64
from .base import CommandsBase, _s, command


class OperationCommands(CommandsBase):
    @command("start_operation")
    def start_operation(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        op = self.state.operations.start(params)
        return {"operation_id": op.id}

    @command("get_operation")
    def get_operation(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        op_id = params.get("operation_id") or params.get("operation_alias")
        op = self.state.operations.get(op_id)
        attrs = op.attributes()
        wanted = params.get("attributes")
        if wanted:
            attrs = {k: attrs[k] for k in wanted if k in attrs}
        return attrs

    @command("abort_operation")
    def abort_operation(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        return self.state.operations.abort(params.get("operation_id"))

    @command("complete_operation")
    def complete_operation(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        self.state.operations.get(params.get("operation_id"))
        return {}

    @command("list_jobs")
    def list_jobs(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        self.state.operations.get(params.get("operation_id"))
        return {
            "jobs": [],
            "cypress_job_count": 0,
            "scheduler_job_count": 0,
            "controller_agent_job_count": 0,
            "archive_job_count": 0,
            "type_counts": {},
            "state_counts": {},
            "errors": [],
        }

    @command("list_operations")
    def list_operations(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        ops = [op.attributes() for op in self.state.operations.ops.values()]
        return {
            "operations": ops,
            "incomplete": False,
            "pool_counts": {},
            "user_counts": {},
            "state_counts": {},
            "type_counts": {},
            "failed_jobs_count": 0,
        }

    @command("execute_batch")
    def execute_batch(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        results = []
        for req in params.get("requests") or []:
            command = _s(req.get("command"))
            sub = dict(req.get("parameters") or {})
            try:
                desc = self.state.descriptors.get(command)
                if (
                    desc is None
                    or desc["input_type"] not in ("null", "structured")
                    or desc["output_type"] not in ("null", "structured")
                ):
                    raise YtError(f"Command {command!r} is not allowed in a batch", 1)
                out = self.run(command, sub, req.get("input"))
                results.append({"output": out} if out is not None else {})
            except YtError as e:
                results.append({"error": e.to_dict()})
        return {"results": results}

    @command("check_permission")
    def check_permission(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        return {"action": "allow"}

    @command("generate_timestamp")
    def generate_timestamp(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        return {"timestamp": Uint64(self.state.clock.next())}

    @command("get_current_user")
    def get_current_user(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        return {"user": "root"}

    @command("discover_proxies")
    def discover_proxies(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        return {"proxies": [self.state.address]}

    @command("get_supported_features")
    def get_supported_features(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        return {
            "features": {
                "primitive_types": [
                    "int8",
                    "int16",
                    "int32",
                    "int64",
                    "uint8",
                    "uint16",
                    "uint32",
                    "uint64",
                    "double",
                    "float",
                    "boolean",
                    "string",
                    "utf8",
                    "any",
                    "null",
                    "void",
                    "date",
                    "datetime",
                    "timestamp",
                    "interval",
                    "yson",
                    "json",
                    "uuid",
                ],
                "compression_codecs": ["none", "lz4", "zstd_3"],
                "erasure_codecs": ["none"],
            }
        }
