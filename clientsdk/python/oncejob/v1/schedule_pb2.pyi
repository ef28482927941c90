from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from oncejob.v1 import job_pb2 as _job_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

CATCHUP_POLICY_LATEST: CatchupPolicy
CATCHUP_POLICY_NONE: CatchupPolicy
CATCHUP_POLICY_UNSPECIFIED: CatchupPolicy
DESCRIPTOR: _descriptor.FileDescriptor
OVERLAP_POLICY_ALLOW: OverlapPolicy
OVERLAP_POLICY_BUFFER_ONE: OverlapPolicy
OVERLAP_POLICY_SKIP: OverlapPolicy
OVERLAP_POLICY_UNSPECIFIED: OverlapPolicy
SCHEDULE_VIEW_BASIC: ScheduleView
SCHEDULE_VIEW_FULL: ScheduleView
SCHEDULE_VIEW_UNSPECIFIED: ScheduleView
SLOT_OUTCOME_BUFFERED: SlotOutcome
SLOT_OUTCOME_FIRED: SlotOutcome
SLOT_OUTCOME_MISSED: SlotOutcome
SLOT_OUTCOME_SKIPPED: SlotOutcome
SLOT_OUTCOME_UNSPECIFIED: SlotOutcome

class CreateScheduleRequest(_message.Message):
    __slots__ = ["catchup", "cron", "interval", "job", "misfire_threshold", "name", "overlap", "time_zone"]
    CATCHUP_FIELD_NUMBER: _ClassVar[int]
    CRON_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    MISFIRE_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    catchup: CatchupPolicy
    cron: str
    interval: _duration_pb2.Duration
    job: _job_pb2.SubmitJobRequest
    misfire_threshold: _duration_pb2.Duration
    name: str
    overlap: OverlapPolicy
    time_zone: str
    def __init__(self, name: _Optional[str] = ..., cron: _Optional[str] = ..., interval: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., time_zone: _Optional[str] = ..., job: _Optional[_Union[_job_pb2.SubmitJobRequest, _Mapping]] = ..., overlap: _Optional[_Union[OverlapPolicy, str]] = ..., catchup: _Optional[_Union[CatchupPolicy, str]] = ..., misfire_threshold: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class CreateScheduleResponse(_message.Message):
    __slots__ = ["schedule"]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class DeleteScheduleRequest(_message.Message):
    __slots__ = ["schedule_id"]
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    def __init__(self, schedule_id: _Optional[str] = ...) -> None: ...

class DeleteScheduleResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class GetScheduleRequest(_message.Message):
    __slots__ = ["schedule_id"]
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    def __init__(self, schedule_id: _Optional[str] = ...) -> None: ...

class GetScheduleResponse(_message.Message):
    __slots__ = ["schedule"]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class ListSchedulesRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "view"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    view: ScheduleView
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., view: _Optional[_Union[ScheduleView, str]] = ...) -> None: ...

class ListSchedulesResponse(_message.Message):
    __slots__ = ["next_page_token", "schedules"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SCHEDULES_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    schedules: _containers.RepeatedCompositeFieldContainer[Schedule]
    def __init__(self, schedules: _Optional[_Iterable[_Union[Schedule, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class PauseScheduleRequest(_message.Message):
    __slots__ = ["schedule_id"]
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    def __init__(self, schedule_id: _Optional[str] = ...) -> None: ...

class PauseScheduleResponse(_message.Message):
    __slots__ = ["schedule"]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class ResumeScheduleRequest(_message.Message):
    __slots__ = ["schedule_id"]
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    def __init__(self, schedule_id: _Optional[str] = ...) -> None: ...

class ResumeScheduleResponse(_message.Message):
    __slots__ = ["schedule"]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class Schedule(_message.Message):
    __slots__ = ["catchup", "create_time", "cron", "id", "idempotency_key", "interval", "job", "misfire_threshold", "name", "next_slot_time", "overlap", "paused", "recent_slots", "time_zone"]
    CATCHUP_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    CRON_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    MISFIRE_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NEXT_SLOT_TIME_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    RECENT_SLOTS_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    catchup: CatchupPolicy
    create_time: _timestamp_pb2.Timestamp
    cron: str
    id: str
    idempotency_key: str
    interval: _duration_pb2.Duration
    job: _job_pb2.SubmitJobRequest
    misfire_threshold: _duration_pb2.Duration
    name: str
    next_slot_time: _timestamp_pb2.Timestamp
    overlap: OverlapPolicy
    paused: bool
    recent_slots: _containers.RepeatedCompositeFieldContainer[ScheduleSlot]
    time_zone: str
    def __init__(self, id: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., name: _Optional[str] = ..., cron: _Optional[str] = ..., interval: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., time_zone: _Optional[str] = ..., job: _Optional[_Union[_job_pb2.SubmitJobRequest, _Mapping]] = ..., overlap: _Optional[_Union[OverlapPolicy, str]] = ..., catchup: _Optional[_Union[CatchupPolicy, str]] = ..., misfire_threshold: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., paused: bool = ..., next_slot_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., create_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., recent_slots: _Optional[_Iterable[_Union[ScheduleSlot, _Mapping]]] = ...) -> None: ...

class ScheduleSlot(_message.Message):
    __slots__ = ["decide_time", "job_id", "outcome", "reason", "slot_time"]
    DECIDE_TIME_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SLOT_TIME_FIELD_NUMBER: _ClassVar[int]
    decide_time: _timestamp_pb2.Timestamp
    job_id: str
    outcome: SlotOutcome
    reason: str
    slot_time: _timestamp_pb2.Timestamp
    def __init__(self, slot_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., outcome: _Optional[_Union[SlotOutcome, str]] = ..., job_id: _Optional[str] = ..., reason: _Optional[str] = ..., decide_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class OverlapPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class CatchupPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class SlotOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ScheduleView(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
