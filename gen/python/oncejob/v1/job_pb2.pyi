from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.rpc import status_pb2 as _status_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
JOB_STAGE_CHUNKS_READY: JobStage
JOB_STAGE_LLM_DONE: JobStage
JOB_STAGE_PUBLISHED: JobStage
JOB_STAGE_TEXT_EXTRACTED: JobStage
JOB_STAGE_UNSPECIFIED: JobStage
JOB_STAGE_UPLOADED: JobStage
JOB_STAGE_VALIDATED: JobStage
JOB_STATUS_AWAITING_APPROVAL: JobStatus
JOB_STATUS_CANCELLED: JobStatus
JOB_STATUS_DEAD_LETTERED: JobStatus
JOB_STATUS_FAILED: JobStatus
JOB_STATUS_OUTCOME_UNKNOWN: JobStatus
JOB_STATUS_QUEUED: JobStatus
JOB_STATUS_RETRY_WAIT: JobStatus
JOB_STATUS_RUNNING: JobStatus
JOB_STATUS_SUCCEEDED: JobStatus
JOB_STATUS_UNSPECIFIED: JobStatus
JOB_VIEW_BASIC: JobView
JOB_VIEW_FULL: JobView
JOB_VIEW_UNSPECIFIED: JobView
LLM_OUTCOME_CANCELLED: LlmOutcome
LLM_OUTCOME_INVALID_OUTPUT: LlmOutcome
LLM_OUTCOME_INVALID_REQUEST: LlmOutcome
LLM_OUTCOME_OUTCOME_UNKNOWN: LlmOutcome
LLM_OUTCOME_RATE_LIMITED: LlmOutcome
LLM_OUTCOME_SUCCEEDED: LlmOutcome
LLM_OUTCOME_UNAVAILABLE: LlmOutcome
LLM_OUTCOME_UNSPECIFIED: LlmOutcome
PRIORITY_BATCH: Priority
PRIORITY_INTERACTIVE: Priority
PRIORITY_UNSPECIFIED: Priority
RESOLUTION_FAIL: Resolution
RESOLUTION_RETRY: Resolution
RESOLUTION_UNSPECIFIED: Resolution
SUBMIT_OUTCOME_CREATED: SubmitOutcome
SUBMIT_OUTCOME_DEDUPLICATED: SubmitOutcome
SUBMIT_OUTCOME_EXISTING: SubmitOutcome
SUBMIT_OUTCOME_UNSPECIFIED: SubmitOutcome

class Actor(_message.Message):
    __slots__ = ["key_prefix", "role", "rpc"]
    KEY_PREFIX_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    RPC_FIELD_NUMBER: _ClassVar[int]
    key_prefix: str
    role: str
    rpc: str
    def __init__(self, key_prefix: _Optional[str] = ..., role: _Optional[str] = ..., rpc: _Optional[str] = ...) -> None: ...

class ApproveJobRequest(_message.Message):
    __slots__ = ["approve", "job_id", "reason"]
    APPROVE_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    approve: bool
    job_id: str
    reason: str
    def __init__(self, job_id: _Optional[str] = ..., approve: bool = ..., reason: _Optional[str] = ...) -> None: ...

class ApproveJobResponse(_message.Message):
    __slots__ = ["job"]
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: Job
    def __init__(self, job: _Optional[_Union[Job, _Mapping]] = ...) -> None: ...

class CancelJobRequest(_message.Message):
    __slots__ = ["job_id", "reason"]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    reason: str
    def __init__(self, job_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class CancelJobResponse(_message.Message):
    __slots__ = ["job"]
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: Job
    def __init__(self, job: _Optional[_Union[Job, _Mapping]] = ...) -> None: ...

class CountJobsRequest(_message.Message):
    __slots__ = ["pipeline"]
    PIPELINE_FIELD_NUMBER: _ClassVar[int]
    pipeline: str
    def __init__(self, pipeline: _Optional[str] = ...) -> None: ...

class CountJobsResponse(_message.Message):
    __slots__ = ["counts", "total"]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    counts: _containers.RepeatedCompositeFieldContainer[JobStatusCount]
    total: int
    def __init__(self, counts: _Optional[_Iterable[_Union[JobStatusCount, _Mapping]]] = ..., total: _Optional[int] = ...) -> None: ...

class Document(_message.Message):
    __slots__ = ["data", "media_type", "name", "text"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    MEDIA_TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    media_type: str
    name: str
    text: str
    def __init__(self, text: _Optional[str] = ..., data: _Optional[bytes] = ..., media_type: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class GetJobRequest(_message.Message):
    __slots__ = ["job_id", "view"]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    view: JobView
    def __init__(self, job_id: _Optional[str] = ..., view: _Optional[_Union[JobView, str]] = ...) -> None: ...

class GetJobResponse(_message.Message):
    __slots__ = ["job"]
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: Job
    def __init__(self, job: _Optional[_Union[Job, _Mapping]] = ...) -> None: ...

class Job(_message.Message):
    __slots__ = ["attempt", "checkpoints", "create_time", "dedup_key", "deduplicated_from", "document_media_type", "document_name", "document_sha256", "document_size_bytes", "error", "finish_time", "id", "idempotency_key", "labels", "llm_attempts", "model_profile", "next_attempt_time", "output", "params", "pipeline", "pipeline_version", "priority", "prompt_version", "run_id", "stage", "status", "update_time", "usage"]
    class LabelsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINTS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    DEDUPLICATED_FROM_FIELD_NUMBER: _ClassVar[int]
    DEDUP_KEY_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_MEDIA_TYPE_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_NAME_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_SHA256_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FINISH_TIME_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    LLM_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    MODEL_PROFILE_FIELD_NUMBER: _ClassVar[int]
    NEXT_ATTEMPT_TIME_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_VERSION_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    PROMPT_VERSION_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    checkpoints: _containers.RepeatedCompositeFieldContainer[StageCheckpoint]
    create_time: _timestamp_pb2.Timestamp
    dedup_key: str
    deduplicated_from: str
    document_media_type: str
    document_name: str
    document_sha256: str
    document_size_bytes: int
    error: JobError
    finish_time: _timestamp_pb2.Timestamp
    id: str
    idempotency_key: str
    labels: _containers.ScalarMap[str, str]
    llm_attempts: _containers.RepeatedCompositeFieldContainer[LlmAttempt]
    model_profile: str
    next_attempt_time: _timestamp_pb2.Timestamp
    output: _struct_pb2.Struct
    params: _struct_pb2.Struct
    pipeline: str
    pipeline_version: int
    priority: Priority
    prompt_version: str
    run_id: str
    stage: JobStage
    status: JobStatus
    update_time: _timestamp_pb2.Timestamp
    usage: JobUsage
    def __init__(self, id: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., dedup_key: _Optional[str] = ..., pipeline: _Optional[str] = ..., pipeline_version: _Optional[int] = ..., prompt_version: _Optional[str] = ..., model_profile: _Optional[str] = ..., status: _Optional[_Union[JobStatus, str]] = ..., stage: _Optional[_Union[JobStage, str]] = ..., attempt: _Optional[int] = ..., output: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., error: _Optional[_Union[JobError, _Mapping]] = ..., deduplicated_from: _Optional[str] = ..., usage: _Optional[_Union[JobUsage, _Mapping]] = ..., create_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., finish_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., document_sha256: _Optional[str] = ..., document_media_type: _Optional[str] = ..., document_name: _Optional[str] = ..., document_size_bytes: _Optional[int] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., labels: _Optional[_Mapping[str, str]] = ..., checkpoints: _Optional[_Iterable[_Union[StageCheckpoint, _Mapping]]] = ..., llm_attempts: _Optional[_Iterable[_Union[LlmAttempt, _Mapping]]] = ..., priority: _Optional[_Union[Priority, str]] = ..., run_id: _Optional[str] = ..., next_attempt_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class JobError(_message.Message):
    __slots__ = ["code", "message", "retryable"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    retryable: bool
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ..., retryable: bool = ...) -> None: ...

class JobEvent(_message.Message):
    __slots__ = ["actor", "attempt", "job_id", "message", "next_attempt_time", "seq", "stage", "status", "time"]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    NEXT_ATTEMPT_TIME_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    actor: Actor
    attempt: int
    job_id: str
    message: str
    next_attempt_time: _timestamp_pb2.Timestamp
    seq: int
    stage: JobStage
    status: JobStatus
    time: _timestamp_pb2.Timestamp
    def __init__(self, job_id: _Optional[str] = ..., seq: _Optional[int] = ..., status: _Optional[_Union[JobStatus, str]] = ..., stage: _Optional[_Union[JobStage, str]] = ..., attempt: _Optional[int] = ..., time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., message: _Optional[str] = ..., actor: _Optional[_Union[Actor, _Mapping]] = ..., next_attempt_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class JobStatusCount(_message.Message):
    __slots__ = ["count", "status"]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    count: int
    status: JobStatus
    def __init__(self, status: _Optional[_Union[JobStatus, str]] = ..., count: _Optional[int] = ...) -> None: ...

class JobUsage(_message.Message):
    __slots__ = ["completion_tokens", "cost_micros", "llm_calls", "prompt_tokens"]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_MICROS_FIELD_NUMBER: _ClassVar[int]
    LLM_CALLS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    completion_tokens: int
    cost_micros: int
    llm_calls: int
    prompt_tokens: int
    def __init__(self, prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., cost_micros: _Optional[int] = ..., llm_calls: _Optional[int] = ...) -> None: ...

class ListJobsRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "pipeline", "run_id", "status", "view"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    pipeline: str
    run_id: str
    status: JobStatus
    view: JobView
    def __init__(self, status: _Optional[_Union[JobStatus, str]] = ..., pipeline: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., run_id: _Optional[str] = ..., view: _Optional[_Union[JobView, str]] = ...) -> None: ...

class ListJobsResponse(_message.Message):
    __slots__ = ["jobs", "next_page_token", "watch_cursor"]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    WATCH_CURSOR_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[Job]
    next_page_token: str
    watch_cursor: str
    def __init__(self, jobs: _Optional[_Iterable[_Union[Job, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., watch_cursor: _Optional[str] = ...) -> None: ...

class LlmAttempt(_message.Message):
    __slots__ = ["billed", "chunk", "completion_tokens", "cost_micros", "create_time", "error", "job_attempt", "latency_ms", "model", "outcome", "prompt_tokens", "provider_key", "provider_request_id", "stage"]
    BILLED_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_MICROS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    JOB_ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_KEY_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    billed: bool
    chunk: int
    completion_tokens: int
    cost_micros: int
    create_time: _timestamp_pb2.Timestamp
    error: str
    job_attempt: int
    latency_ms: int
    model: str
    outcome: LlmOutcome
    prompt_tokens: int
    provider_key: str
    provider_request_id: str
    stage: JobStage
    def __init__(self, job_attempt: _Optional[int] = ..., stage: _Optional[_Union[JobStage, str]] = ..., chunk: _Optional[int] = ..., provider_key: _Optional[str] = ..., model: _Optional[str] = ..., outcome: _Optional[_Union[LlmOutcome, str]] = ..., billed: bool = ..., prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., cost_micros: _Optional[int] = ..., latency_ms: _Optional[int] = ..., provider_request_id: _Optional[str] = ..., error: _Optional[str] = ..., create_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ReplayJobRequest(_message.Message):
    __slots__ = ["from_stage", "job_id", "reason"]
    FROM_STAGE_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    from_stage: JobStage
    job_id: str
    reason: str
    def __init__(self, job_id: _Optional[str] = ..., from_stage: _Optional[_Union[JobStage, str]] = ..., reason: _Optional[str] = ...) -> None: ...

class ReplayJobResponse(_message.Message):
    __slots__ = ["job"]
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: Job
    def __init__(self, job: _Optional[_Union[Job, _Mapping]] = ...) -> None: ...

class ResolveJobRequest(_message.Message):
    __slots__ = ["job_id", "reason", "resolution"]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RESOLUTION_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    reason: str
    resolution: Resolution
    def __init__(self, job_id: _Optional[str] = ..., resolution: _Optional[_Union[Resolution, str]] = ..., reason: _Optional[str] = ...) -> None: ...

class ResolveJobResponse(_message.Message):
    __slots__ = ["job"]
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: Job
    def __init__(self, job: _Optional[_Union[Job, _Mapping]] = ...) -> None: ...

class StageCheckpoint(_message.Message):
    __slots__ = ["attempt", "chunk", "code_version", "create_time", "output_size_bytes", "reused_from_job_id", "stage", "stage_key"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    CODE_VERSION_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    REUSED_FROM_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    STAGE_KEY_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    chunk: int
    code_version: str
    create_time: _timestamp_pb2.Timestamp
    output_size_bytes: int
    reused_from_job_id: str
    stage: JobStage
    stage_key: str
    def __init__(self, stage: _Optional[_Union[JobStage, str]] = ..., chunk: _Optional[int] = ..., stage_key: _Optional[str] = ..., code_version: _Optional[str] = ..., attempt: _Optional[int] = ..., reused_from_job_id: _Optional[str] = ..., output_size_bytes: _Optional[int] = ..., create_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SubmitJobRequest(_message.Message):
    __slots__ = ["document", "labels", "model_profile", "params", "pipeline", "priority"]
    class LabelsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    MODEL_PROFILE_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    document: Document
    labels: _containers.ScalarMap[str, str]
    model_profile: str
    params: _struct_pb2.Struct
    pipeline: str
    priority: Priority
    def __init__(self, pipeline: _Optional[str] = ..., document: _Optional[_Union[Document, _Mapping]] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., labels: _Optional[_Mapping[str, str]] = ..., model_profile: _Optional[str] = ..., priority: _Optional[_Union[Priority, str]] = ...) -> None: ...

class SubmitJobResponse(_message.Message):
    __slots__ = ["job", "outcome"]
    JOB_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    job: Job
    outcome: SubmitOutcome
    def __init__(self, job: _Optional[_Union[Job, _Mapping]] = ..., outcome: _Optional[_Union[SubmitOutcome, str]] = ...) -> None: ...

class SubmitJobsItem(_message.Message):
    __slots__ = ["idempotency_key", "request"]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    idempotency_key: str
    request: SubmitJobRequest
    def __init__(self, idempotency_key: _Optional[str] = ..., request: _Optional[_Union[SubmitJobRequest, _Mapping]] = ...) -> None: ...

class SubmitJobsRequest(_message.Message):
    __slots__ = ["items", "run_id"]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[SubmitJobsItem]
    run_id: str
    def __init__(self, items: _Optional[_Iterable[_Union[SubmitJobsItem, _Mapping]]] = ..., run_id: _Optional[str] = ...) -> None: ...

class SubmitJobsResponse(_message.Message):
    __slots__ = ["results"]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[SubmitJobsResult]
    def __init__(self, results: _Optional[_Iterable[_Union[SubmitJobsResult, _Mapping]]] = ...) -> None: ...

class SubmitJobsResult(_message.Message):
    __slots__ = ["already_in_run", "error", "job", "outcome"]
    ALREADY_IN_RUN_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    already_in_run: bool
    error: _status_pb2.Status
    job: Job
    outcome: SubmitOutcome
    def __init__(self, job: _Optional[_Union[Job, _Mapping]] = ..., outcome: _Optional[_Union[SubmitOutcome, str]] = ..., error: _Optional[_Union[_status_pb2.Status, _Mapping]] = ..., already_in_run: bool = ...) -> None: ...

class WatchJobRequest(_message.Message):
    __slots__ = ["after_seq", "job_id"]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    after_seq: int
    job_id: str
    def __init__(self, job_id: _Optional[str] = ..., after_seq: _Optional[int] = ...) -> None: ...

class WatchJobResponse(_message.Message):
    __slots__ = ["event"]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: JobEvent
    def __init__(self, event: _Optional[_Union[JobEvent, _Mapping]] = ...) -> None: ...

class WatchJobsRequest(_message.Message):
    __slots__ = ["after_cursor", "pipeline", "status"]
    AFTER_CURSOR_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    after_cursor: str
    pipeline: str
    status: JobStatus
    def __init__(self, status: _Optional[_Union[JobStatus, str]] = ..., pipeline: _Optional[str] = ..., after_cursor: _Optional[str] = ...) -> None: ...

class WatchJobsResponse(_message.Message):
    __slots__ = ["cursor", "event", "job"]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    cursor: str
    event: JobEvent
    job: Job
    def __init__(self, cursor: _Optional[str] = ..., event: _Optional[_Union[JobEvent, _Mapping]] = ..., job: _Optional[_Union[Job, _Mapping]] = ...) -> None: ...

class JobStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class JobStage(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class SubmitOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Priority(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class JobView(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Resolution(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class LlmOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
