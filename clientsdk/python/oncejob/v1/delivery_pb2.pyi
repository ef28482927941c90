from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DELIVERY_OUTCOME_DEAD_LETTERED: DeliveryOutcome
DELIVERY_OUTCOME_DELIVERED: DeliveryOutcome
DELIVERY_OUTCOME_FAILED: DeliveryOutcome
DELIVERY_OUTCOME_SINK_DISABLED: DeliveryOutcome
DELIVERY_OUTCOME_UNKNOWN: DeliveryOutcome
DELIVERY_OUTCOME_UNSPECIFIED: DeliveryOutcome
DELIVERY_STATUS_DEAD_LETTERED: DeliveryStatus
DELIVERY_STATUS_DELIVERED: DeliveryStatus
DELIVERY_STATUS_PENDING: DeliveryStatus
DELIVERY_STATUS_UNSPECIFIED: DeliveryStatus
DESCRIPTOR: _descriptor.FileDescriptor

class Delivery(_message.Message):
    __slots__ = ["attempt_log", "attempts", "create_time", "deliver_time", "due_time", "event_id", "event_type", "external_ref", "id", "job_id", "last_error", "last_outcome", "sink", "status", "update_time"]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_LOG_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    DELIVER_TIME_FIELD_NUMBER: _ClassVar[int]
    DUE_TIME_FIELD_NUMBER: _ClassVar[int]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    EXTERNAL_REF_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    LAST_OUTCOME_FIELD_NUMBER: _ClassVar[int]
    SINK_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    attempt_log: _containers.RepeatedCompositeFieldContainer[DeliveryAttempt]
    attempts: int
    create_time: _timestamp_pb2.Timestamp
    deliver_time: _timestamp_pb2.Timestamp
    due_time: _timestamp_pb2.Timestamp
    event_id: str
    event_type: str
    external_ref: str
    id: int
    job_id: str
    last_error: str
    last_outcome: DeliveryOutcome
    sink: str
    status: DeliveryStatus
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[int] = ..., event_id: _Optional[str] = ..., event_type: _Optional[str] = ..., sink: _Optional[str] = ..., job_id: _Optional[str] = ..., status: _Optional[_Union[DeliveryStatus, str]] = ..., attempts: _Optional[int] = ..., due_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., last_outcome: _Optional[_Union[DeliveryOutcome, str]] = ..., last_error: _Optional[str] = ..., external_ref: _Optional[str] = ..., create_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., deliver_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., attempt_log: _Optional[_Iterable[_Union[DeliveryAttempt, _Mapping]]] = ...) -> None: ...

class DeliveryAttempt(_message.Message):
    __slots__ = ["attempt", "duplicate", "error", "external_ref", "http_status", "latency_ms", "outcome", "relay", "start_time"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    EXTERNAL_REF_FIELD_NUMBER: _ClassVar[int]
    HTTP_STATUS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    RELAY_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    duplicate: bool
    error: str
    external_ref: str
    http_status: int
    latency_ms: int
    outcome: DeliveryOutcome
    relay: str
    start_time: _timestamp_pb2.Timestamp
    def __init__(self, attempt: _Optional[int] = ..., relay: _Optional[str] = ..., outcome: _Optional[_Union[DeliveryOutcome, str]] = ..., http_status: _Optional[int] = ..., error: _Optional[str] = ..., external_ref: _Optional[str] = ..., duplicate: bool = ..., start_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., latency_ms: _Optional[int] = ...) -> None: ...

class ListDeliveriesRequest(_message.Message):
    __slots__ = ["include_attempts", "job_id", "page_size", "page_token", "sink", "status"]
    INCLUDE_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SINK_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    include_attempts: bool
    job_id: str
    page_size: int
    page_token: str
    sink: str
    status: DeliveryStatus
    def __init__(self, job_id: _Optional[str] = ..., status: _Optional[_Union[DeliveryStatus, str]] = ..., sink: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., include_attempts: bool = ...) -> None: ...

class ListDeliveriesResponse(_message.Message):
    __slots__ = ["deliveries", "disabled_sinks", "next_page_token"]
    DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    DISABLED_SINKS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    deliveries: _containers.RepeatedCompositeFieldContainer[Delivery]
    disabled_sinks: _containers.RepeatedCompositeFieldContainer[SinkState]
    next_page_token: str
    def __init__(self, deliveries: _Optional[_Iterable[_Union[Delivery, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., disabled_sinks: _Optional[_Iterable[_Union[SinkState, _Mapping]]] = ...) -> None: ...

class RetryDeliveryRequest(_message.Message):
    __slots__ = ["delivery_id", "sink"]
    DELIVERY_ID_FIELD_NUMBER: _ClassVar[int]
    SINK_FIELD_NUMBER: _ClassVar[int]
    delivery_id: int
    sink: str
    def __init__(self, delivery_id: _Optional[int] = ..., sink: _Optional[str] = ...) -> None: ...

class RetryDeliveryResponse(_message.Message):
    __slots__ = ["deliveries", "sink_enabled"]
    DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    SINK_ENABLED_FIELD_NUMBER: _ClassVar[int]
    deliveries: _containers.RepeatedCompositeFieldContainer[Delivery]
    sink_enabled: bool
    def __init__(self, deliveries: _Optional[_Iterable[_Union[Delivery, _Mapping]]] = ..., sink_enabled: bool = ...) -> None: ...

class SinkState(_message.Message):
    __slots__ = ["disable_time", "reason", "sink"]
    DISABLE_TIME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SINK_FIELD_NUMBER: _ClassVar[int]
    disable_time: _timestamp_pb2.Timestamp
    reason: str
    sink: str
    def __init__(self, sink: _Optional[str] = ..., disable_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., reason: _Optional[str] = ...) -> None: ...

class DeliveryStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class DeliveryOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
