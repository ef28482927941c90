from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from oncejob.v1 import job_pb2 as _job_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
RUN_STATE_CANCELLED: RunState
RUN_STATE_COMPLETED: RunState
RUN_STATE_OPEN: RunState
RUN_STATE_UNSPECIFIED: RunState

class CancelRunRequest(_message.Message):
    __slots__ = ["reason", "run_id"]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    reason: str
    run_id: str
    def __init__(self, run_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class CancelRunResponse(_message.Message):
    __slots__ = ["cancelled", "run"]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    cancelled: int
    run: Run
    def __init__(self, cancelled: _Optional[int] = ..., run: _Optional[_Union[Run, _Mapping]] = ...) -> None: ...

class CreateRunRequest(_message.Message):
    __slots__ = ["labels", "model_profile", "name", "params", "pipeline", "provider_batch"]
    class LabelsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    LABELS_FIELD_NUMBER: _ClassVar[int]
    MODEL_PROFILE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_BATCH_FIELD_NUMBER: _ClassVar[int]
    labels: _containers.ScalarMap[str, str]
    model_profile: str
    name: str
    params: _struct_pb2.Struct
    pipeline: str
    provider_batch: bool
    def __init__(self, name: _Optional[str] = ..., pipeline: _Optional[str] = ..., model_profile: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., labels: _Optional[_Mapping[str, str]] = ..., provider_batch: bool = ...) -> None: ...

class CreateRunResponse(_message.Message):
    __slots__ = ["run"]
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: Run
    def __init__(self, run: _Optional[_Union[Run, _Mapping]] = ...) -> None: ...

class GetRunRequest(_message.Message):
    __slots__ = ["run_id"]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class GetRunResponse(_message.Message):
    __slots__ = ["run"]
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: Run
    def __init__(self, run: _Optional[_Union[Run, _Mapping]] = ...) -> None: ...

class ListRunBatchesRequest(_message.Message):
    __slots__ = ["run_id"]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class ListRunBatchesResponse(_message.Message):
    __slots__ = ["batches"]
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    batches: _containers.RepeatedCompositeFieldContainer[RunBatch]
    def __init__(self, batches: _Optional[_Iterable[_Union[RunBatch, _Mapping]]] = ...) -> None: ...

class ListRunsRequest(_message.Message):
    __slots__ = ["page_size", "page_token"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListRunsResponse(_message.Message):
    __slots__ = ["next_page_token", "runs"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    runs: _containers.RepeatedCompositeFieldContainer[Run]
    def __init__(self, runs: _Optional[_Iterable[_Union[Run, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ProviderLimitUse(_message.Message):
    __slots__ = ["calls_in_flight", "calls_in_flight_limit", "configured_requests_per_minute", "configured_tokens_per_minute", "granted_calls", "name", "paused_until", "rate_limited_calls", "requests_per_minute", "tokens_per_minute", "waiting_calls"]
    CALLS_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    CALLS_IN_FLIGHT_LIMIT_FIELD_NUMBER: _ClassVar[int]
    CONFIGURED_REQUESTS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    CONFIGURED_TOKENS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    GRANTED_CALLS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PAUSED_UNTIL_FIELD_NUMBER: _ClassVar[int]
    RATE_LIMITED_CALLS_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    TOKENS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    WAITING_CALLS_FIELD_NUMBER: _ClassVar[int]
    calls_in_flight: int
    calls_in_flight_limit: int
    configured_requests_per_minute: float
    configured_tokens_per_minute: float
    granted_calls: int
    name: str
    paused_until: _timestamp_pb2.Timestamp
    rate_limited_calls: int
    requests_per_minute: float
    tokens_per_minute: float
    waiting_calls: int
    def __init__(self, name: _Optional[str] = ..., requests_per_minute: _Optional[float] = ..., tokens_per_minute: _Optional[float] = ..., calls_in_flight_limit: _Optional[int] = ..., configured_requests_per_minute: _Optional[float] = ..., configured_tokens_per_minute: _Optional[float] = ..., calls_in_flight: _Optional[int] = ..., waiting_calls: _Optional[int] = ..., granted_calls: _Optional[int] = ..., rate_limited_calls: _Optional[int] = ..., paused_until: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class RetryRunFailuresRequest(_message.Message):
    __slots__ = ["reason", "run_id"]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    reason: str
    run_id: str
    def __init__(self, run_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class RetryRunFailuresResponse(_message.Message):
    __slots__ = ["replayed", "run"]
    REPLAYED_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    replayed: int
    run: Run
    def __init__(self, replayed: _Optional[int] = ..., run: _Optional[_Union[Run, _Mapping]] = ...) -> None: ...

class Run(_message.Message):
    __slots__ = ["cancel_time", "create_time", "id", "idempotency_key", "labels", "model_profile", "name", "params", "pipeline", "progress", "provider_batch", "state"]
    class LabelsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CANCEL_TIME_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    MODEL_PROFILE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_BATCH_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    cancel_time: _timestamp_pb2.Timestamp
    create_time: _timestamp_pb2.Timestamp
    id: str
    idempotency_key: str
    labels: _containers.ScalarMap[str, str]
    model_profile: str
    name: str
    params: _struct_pb2.Struct
    pipeline: str
    progress: RunProgress
    provider_batch: bool
    state: RunState
    def __init__(self, id: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., name: _Optional[str] = ..., pipeline: _Optional[str] = ..., model_profile: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., labels: _Optional[_Mapping[str, str]] = ..., state: _Optional[_Union[RunState, str]] = ..., progress: _Optional[_Union[RunProgress, _Mapping]] = ..., create_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., cancel_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., provider_batch: bool = ...) -> None: ...

class RunBatch(_message.Message):
    __slots__ = ["answered_lines", "batch_id", "billed_lines", "cost_micros", "create_time", "expire_time", "lines", "price_class", "status", "update_time"]
    ANSWERED_LINES_FIELD_NUMBER: _ClassVar[int]
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    BILLED_LINES_FIELD_NUMBER: _ClassVar[int]
    COST_MICROS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    LINES_FIELD_NUMBER: _ClassVar[int]
    PRICE_CLASS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    answered_lines: int
    batch_id: str
    billed_lines: int
    cost_micros: int
    create_time: _timestamp_pb2.Timestamp
    expire_time: _timestamp_pb2.Timestamp
    lines: int
    price_class: str
    status: str
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, batch_id: _Optional[str] = ..., status: _Optional[str] = ..., lines: _Optional[int] = ..., answered_lines: _Optional[int] = ..., price_class: _Optional[str] = ..., cost_micros: _Optional[int] = ..., create_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., expire_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., billed_lines: _Optional[int] = ...) -> None: ...

class RunProgress(_message.Message):
    __slots__ = ["awaiting_approval", "cancelled", "complete", "computed", "dead_lettered", "estimated_time_left", "failed", "items", "items_per_second", "limit", "limit_time_left", "outcome_unknown", "provider_batch_window", "queued", "retry_wait", "reused", "running", "seq", "succeeded", "usage"]
    AWAITING_APPROVAL_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    COMPUTED_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTERED_FIELD_NUMBER: _ClassVar[int]
    ESTIMATED_TIME_LEFT_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    ITEMS_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    LIMIT_TIME_LEFT_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_UNKNOWN_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_BATCH_WINDOW_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    RETRY_WAIT_FIELD_NUMBER: _ClassVar[int]
    REUSED_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    awaiting_approval: int
    cancelled: int
    complete: bool
    computed: int
    dead_lettered: int
    estimated_time_left: _duration_pb2.Duration
    failed: int
    items: int
    items_per_second: float
    limit: ProviderLimitUse
    limit_time_left: _duration_pb2.Duration
    outcome_unknown: int
    provider_batch_window: _duration_pb2.Duration
    queued: int
    retry_wait: int
    reused: int
    running: int
    seq: int
    succeeded: int
    usage: _job_pb2.JobUsage
    def __init__(self, seq: _Optional[int] = ..., items: _Optional[int] = ..., queued: _Optional[int] = ..., running: _Optional[int] = ..., retry_wait: _Optional[int] = ..., awaiting_approval: _Optional[int] = ..., outcome_unknown: _Optional[int] = ..., succeeded: _Optional[int] = ..., failed: _Optional[int] = ..., cancelled: _Optional[int] = ..., dead_lettered: _Optional[int] = ..., reused: _Optional[int] = ..., computed: _Optional[int] = ..., usage: _Optional[_Union[_job_pb2.JobUsage, _Mapping]] = ..., items_per_second: _Optional[float] = ..., estimated_time_left: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., complete: bool = ..., provider_batch_window: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., limit_time_left: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., limit: _Optional[_Union[ProviderLimitUse, _Mapping]] = ...) -> None: ...

class WatchRunRequest(_message.Message):
    __slots__ = ["after_seq", "run_id"]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    after_seq: int
    run_id: str
    def __init__(self, run_id: _Optional[str] = ..., after_seq: _Optional[int] = ...) -> None: ...

class WatchRunResponse(_message.Message):
    __slots__ = ["run"]
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: Run
    def __init__(self, run: _Optional[_Union[Run, _Mapping]] = ...) -> None: ...

class RunState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
