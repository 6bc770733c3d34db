"""A fault-injecting gRPC proxy between ki and the Hatchet engine's gRPC port (engine-backed tests, the bench).

Not a test module. :class:`GrpcFaultProxy` is a real gRPC server on 127.0.0.1 that forwards every call of
Hatchet's services (all four cardinalities, learnt from the SDK's own service descriptors) to the engine
with its metadata, and passes the engine's status, details and trailing metadata back (so an idempotency
collision's rich status still reaches the SDK). A *fault plan* decides, per trigger call
(``BulkTriggerWorkflow`` and ``TriggerWorkflow``), what happens instead of a plain forward:

* ``"refuse"`` — answer INTERNAL ``could not trigger workflows: no trigger slots available`` without
  forwarding (what engine v0.105.0 answers when its trigger-write slots are taken);
* ``"lost"`` — forward (the engine makes the runs), then answer UNAVAILABLE (the acknowledgement is lost);
* ``"partial"`` — forward, then answer with the last run id missing (a partial bulk result);
* ``"hang"`` — forward, then hold the answer for :attr:`GrpcFaultProxy.hang_seconds` (a timeout);
* ``"phantom"`` — answer with made-up run ids without forwarding (the engine acknowledges runs it never
  makes, as it does when it sheds load or a workflow is unregistered); only while the engine never saw its
  items (same run, object and ``ki_attempt``): a resend of items it may have made would collide instead, so a
  phantom the plan gives to a resend goes to the same method's next call of fresh items;
* ``None`` — forward.

:attr:`GrpcFaultProxy.log` records each trigger call (:class:`TriggerCall`: wall-clock time in epoch seconds,
method, fault, the ki object ids in the request's metadata, the run ids answered).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc

TRIGGER_METHODS = ("BulkTriggerWorkflow", "TriggerWorkflow")
REFUSAL = "could not trigger workflows: no trigger slots available"
#: A fault plan: (method name, 0-based index of this call among that method's calls) → fault or None.
FaultPlan = Callable[[str, int], str | None]


def _service_methods() -> dict[str, tuple[bool, bool]]:
    """``/package.Service/Method`` → (client streaming, server streaming) for every Hatchet service."""
    from hatchet_sdk.contracts import dispatcher_pb2, events_pb2, workflows_pb2
    from hatchet_sdk.contracts.v1 import dispatcher_pb2 as v1_dispatcher
    from hatchet_sdk.contracts.v1 import workflows_pb2 as v1_workflows

    out = {}
    for module in (dispatcher_pb2, events_pb2, workflows_pb2, v1_dispatcher, v1_workflows):
        for service in module.DESCRIPTOR.services_by_name.values():
            for m in service.methods:
                out[f"/{service.full_name}/{m.name}"] = (m.client_streaming, m.server_streaming)
    return out


@dataclass
class TriggerCall:
    """One trigger call the proxy saw."""

    at: float
    method: str
    fault: str | None
    object_ids: list[str]
    run_ids: list[str] = field(default_factory=list)


def _keys(method: str, request: bytes) -> list[tuple[str, str, str]]:
    """(ki run id, ki object id, ki attempt) of each item of a trigger request (its idempotency key, in effect)."""
    from hatchet_sdk.contracts import workflows_pb2

    if method == "BulkTriggerWorkflow":
        items = list(workflows_pb2.BulkTriggerWorkflowRequest.FromString(request).workflows)
    else:
        items = [workflows_pb2.TriggerWorkflowRequest.FromString(request)]
    out = []
    for item in items:
        try:
            meta = json.loads(item.additional_metadata or "{}")
        except ValueError:
            meta = {}
        out.append((str(meta.get("ki_run_id", "")), str(meta.get("ki_object_id", meta.get("ki_run_id", ""))),
                    str(meta.get("ki_attempt", ""))))
    return out


def _run_ids(method: str, response: bytes) -> list[str]:
    from hatchet_sdk.contracts import workflows_pb2

    if method == "BulkTriggerWorkflow":
        return list(workflows_pb2.BulkTriggerWorkflowResponse.FromString(response).workflow_run_ids)
    return [workflows_pb2.TriggerWorkflowResponse.FromString(response).workflow_run_id]


def _deadline(context: grpc.ServicerContext) -> float | None:
    """The caller's time left (s), None when it set no deadline (grpc then reports a meaningless value)."""
    left = context.time_remaining()
    return left if 0 < left < 86400 else None


def _forwardable(metadata: Any) -> list[tuple[str, Any]]:
    return [(k, v) for k, v in (metadata or ()) if not k.startswith(":") and not k.startswith("grpc-")
            and k not in ("user-agent", "content-type", "te")]


class GrpcFaultProxy:
    """Forward ``127.0.0.1:<port>`` to ``upstream`` (``host:port``), injecting the faults ``plan`` names."""

    def __init__(self, upstream: str, plan: FaultPlan | None = None, *, hang_seconds: float = 5.0):
        self.upstream = upstream
        self.plan: FaultPlan = plan or (lambda method, n: None)
        self.hang_seconds = hang_seconds
        self.log: list[TriggerCall] = []
        self._counts: dict[str, int] = {}
        self._sent: set[tuple[str, str, str]] = set()
        self._owed_phantom: str | None = None  # a phantom the plan gave to a resend: the method's next fresh call
        self._lock = threading.Lock()
        self._methods = _service_methods()
        self._channel = grpc.insecure_channel(upstream, options=[("grpc.max_send_message_length", 8 << 20),
                                                                 ("grpc.max_receive_message_length", 8 << 20)])
        # the SDK pings every 10 s even without calls; grpc's server default answers that with GOAWAY
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=128),
                                   options=[("grpc.max_send_message_length", 8 << 20),
                                            ("grpc.max_receive_message_length", 8 << 20),
                                            ("grpc.keepalive_permit_without_calls", 1),
                                            ("grpc.http2.min_recv_ping_interval_without_data_ms", 1000),
                                            ("grpc.http2.max_ping_strikes", 0)])
        self._server.add_generic_rpc_handlers((_Handler(self),))
        self.port = self._server.add_insecure_port("127.0.0.1:0")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> GrpcFaultProxy:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop(grace=0)
        self._channel.close()

    def faults(self, kind: str | None = None) -> list[TriggerCall]:
        """The trigger calls that met a fault (of ``kind``, or any)."""
        with self._lock:
            return [c for c in self.log if c.fault and (kind is None or c.fault == kind)]

    def _next_fault(self, method: str) -> str | None:
        with self._lock:
            n = self._counts.get(method, 0)
            self._counts[method] = n + 1
        return self.plan(method, n)

    # -- forwarding --------------------------------------------------------------------------------------

    def unary(self, path: str, request: bytes, context: grpc.ServicerContext) -> bytes:
        method = path.rsplit("/", 1)[-1]
        fault = self._next_fault(method) if method in TRIGGER_METHODS else None
        call = None
        if method in TRIGGER_METHODS:
            keys = _keys(method, request)
            with self._lock:
                fresh = not (self._sent & set(keys))
                if fault == "phantom" and not fresh:
                    # a resend: the engine would answer with the runs it made (a collision); the phantom is owed
                    # to this method's next fresh call, so a plan's every fault still happens
                    fault, self._owed_phantom = None, method
                elif fault is None and fresh and self._owed_phantom == method:
                    fault, self._owed_phantom = "phantom", None
                if fault not in ("refuse", "phantom"):
                    self._sent |= set(keys)  # the engine sees these items
                call = TriggerCall(time.time(), method, fault, [k[1] for k in keys])
                self.log.append(call)
        if fault == "refuse":
            context.abort(grpc.StatusCode.INTERNAL, REFUSAL)
        if fault == "phantom":
            from hatchet_sdk.contracts import workflows_pb2

            ids = [str(uuid.uuid4()) for _ in call.object_ids]
            call.run_ids = ids
            if method == "BulkTriggerWorkflow":
                return workflows_pb2.BulkTriggerWorkflowResponse(workflow_run_ids=ids).SerializeToString()
            return workflows_pb2.TriggerWorkflowResponse(workflow_run_id=ids[0]).SerializeToString()
        stub = self._channel.unary_unary(path)
        try:
            response, _ = stub.with_call(request, metadata=_forwardable(context.invocation_metadata()),
                                         timeout=_deadline(context))
        except grpc.RpcError as exc:
            context.set_trailing_metadata(_forwardable(exc.trailing_metadata()) + [
                (k, v) for k, v in (exc.trailing_metadata() or ()) if k == "grpc-status-details-bin"])
            context.abort(exc.code(), exc.details() or "")
        if call is not None:
            call.run_ids = _run_ids(method, response)
        if fault == "lost":
            context.abort(grpc.StatusCode.UNAVAILABLE, "connection reset after the engine answered (injected)")
        if fault == "hang":
            time.sleep(self.hang_seconds)
        if fault == "partial" and method == "BulkTriggerWorkflow":
            from hatchet_sdk.contracts import workflows_pb2

            return workflows_pb2.BulkTriggerWorkflowResponse(workflow_run_ids=call.run_ids[:-1]).SerializeToString()
        return response

    def unary_stream(self, path: str, request: bytes, context: grpc.ServicerContext):
        upstream = self._channel.unary_stream(path)(request, metadata=_forwardable(context.invocation_metadata()),
                                                    timeout=_deadline(context))
        context.add_callback(upstream.cancel)
        yield from self._relay(upstream, context)

    def stream_unary(self, path: str, requests, context: grpc.ServicerContext) -> bytes:
        try:
            return self._channel.stream_unary(path)(requests, metadata=_forwardable(context.invocation_metadata()))
        except grpc.RpcError as exc:
            context.abort(exc.code(), exc.details() or "")

    def stream_stream(self, path: str, requests, context: grpc.ServicerContext):
        upstream = self._channel.stream_stream(path)(requests, metadata=_forwardable(context.invocation_metadata()))
        context.add_callback(upstream.cancel)
        yield from self._relay(upstream, context)

    @staticmethod
    def _relay(upstream, context: grpc.ServicerContext):
        try:
            yield from upstream
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                context.abort(exc.code(), exc.details() or "")


class _Handler(grpc.GenericRpcHandler):
    def __init__(self, proxy: GrpcFaultProxy):
        self.proxy = proxy

    def service(self, handler_call_details):
        path = handler_call_details.method
        kind = self.proxy._methods.get(path)
        if kind is None:
            return None
        p = self.proxy
        client_streaming, server_streaming = kind
        if not client_streaming and not server_streaming:
            return grpc.unary_unary_rpc_method_handler(lambda req, ctx: p.unary(path, req, ctx))
        if not client_streaming:
            return grpc.unary_stream_rpc_method_handler(lambda req, ctx: p.unary_stream(path, req, ctx))
        if not server_streaming:
            return grpc.stream_unary_rpc_method_handler(lambda reqs, ctx: p.stream_unary(path, reqs, ctx))
        return grpc.stream_stream_rpc_method_handler(lambda reqs, ctx: p.stream_stream(path, reqs, ctx))


def every_nth(n: int, faults: list[str], *, first: int = 0, methods: tuple[str, ...] = ("BulkTriggerWorkflow",)
              ) -> FaultPlan:
    """A plan that meets every ``n``-th call (from call ``first``) of ``methods`` with the next fault of
    ``faults`` in turn (cycling), and forwards the rest: a deterministic share of ``1/n`` refused."""
    seen = {"k": 0}
    lock = threading.Lock()

    def plan(method: str, index: int) -> str | None:
        if method not in methods or index < first or (index - first) % n:
            return None
        with lock:
            fault = faults[seen["k"] % len(faults)]
            seen["k"] += 1
        return fault

    return plan
