"""Logging: structlog for our code, the stdlib loggers of libraries routed through the same output.

Every module of the agent and of karmada-bootstrap logs through `log = get_logger(__name__)`. Its
events become stdlib LogRecords (the message with its %-style arguments as the stdlib keeps them,
the bound and keyword fields riding along whole), so there is one path to the output and pytest's
`caplog` sees our events as it sees a library's.

One event per line on stdout: JSON when stdout is not a terminal (or --log-format=json), readable
console output on a terminal (or --log-format=console). Timestamps are ISO 8601 in UTC. Every event,
ours or a library's, passes `redact_secrets` before it is rendered, so bearer tokens, private keys,
passwords and Secret data never reach the output.
"""

from __future__ import annotations

import contextvars
import logging
import re
import sys
from collections.abc import Mapping
from typing import Any, TextIO

import structlog
from structlog.types import EventDict, Processor, WrappedLogger

REDACTED = "[REDACTED]"

# Loggers of libraries that are chatty at INFO/DEBUG; kept at WARNING unless -v asks for more.
NOISY_LOGGERS = (
    "httpx",
    "httpcore",
    "hpack",
    "h2",
    "kubernetes",
    "urllib3",
    "aiohttp.access",
    "asyncio",
)
# klog conventions: V(4) is debug detail, V(6) and up log HTTP requests.
DEBUG_VERBOSITY = 4
HTTP_VERBOSITY = 6
TRACE_VERBOSITY = 9


def level_for_verbosity(verbosity: int) -> int:
    """-v 0..3 -> INFO (upstream's manifests run --v=2), 4 and more -> DEBUG."""
    return logging.DEBUG if verbosity >= DEBUG_VERBOSITY else logging.INFO


def library_level_for_verbosity(verbosity: int) -> int:
    if verbosity >= TRACE_VERBOSITY:
        return logging.DEBUG
    if verbosity >= HTTP_VERBOSITY:
        return logging.INFO
    return logging.WARNING


# ---------------------------------------------------------------------------------------------
# Redaction.

# Keys compared lower-case with '-' and '_' removed. A bare "secret" is not here: it usually holds a
# Secret's name, and a Secret object is recognised by its kind instead.
_SECRET_KEYS = frozenset(
    {
        "authorization",
        "proxyauthorization",
        "cookie",
        "setcookie",
        "token",
        "bearertoken",
        "clientkeydata",
        "clientkey",
        "privatekey",
        "password",
        "passwd",
        "tokensecret",
        "clientsecret",
    }
)
_SECRET_SUFFIXES = ("token", "password", "passwd", "keydata", "keypem", "privatekey", "secretkey")
# A Secret object's payload, and the annotation where `kubectl apply` keeps a copy of it.
_SECRET_PAYLOAD_KEYS = ("data", "stringData")
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

_TEXT_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    # PEM private keys (any algorithm), also when cut off.
    (
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
            re.DOTALL,
        ),
        REDACTED,
    ),
    # Authorization header values written out in text.
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9\-._~+/]+=*"), r"\1" + REDACTED),
    # key: value / key=value / "key": "value" in YAML, JSON, URLs and error messages.
    (
        re.compile(
            r"(?i)((?:client-key-data|token|password|passwd|client-secret)[\"']?\s*[:=]\s*[\"']?)"
            r"[^\s\"',}&;]+"
        ),
        r"\1" + REDACTED,
    ),
    # JWTs (service-account tokens, OIDC id tokens): header.payload.signature.
    (re.compile(r"eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"), REDACTED),
    # The secret half of a bootstrap token (id.secret); the id is not secret.
    (re.compile(r"\b([a-z0-9]{6}\.)[a-z0-9]{16}\b"), r"\1" + REDACTED),
)
# The payload of a Secret serialized as JSON inside a string (a logged response body).
_SECRET_JSON_PAYLOAD = re.compile(r'("(?:data|stringData)"\s*:\s*)\{[^{}]*\}')


def _normalize_key(key: str) -> str:
    return key.lower().replace("-", "").replace("_", "")


def is_secret_key(key: str) -> bool:
    normalized = _normalize_key(key)
    return normalized in _SECRET_KEYS or normalized.endswith(_SECRET_SUFFIXES)


def redact_text(text: str) -> str:
    for pattern, replacement in _TEXT_RULES:
        text = pattern.sub(replacement, text)
    if '"Secret"' in text:
        text = _SECRET_JSON_PAYLOAD.sub(r'\1"' + REDACTED + '"', text)
    return text


def redact(value: Any, _depth: int = 0) -> Any:
    """A copy of `value` with secrets replaced; containers are copied, the input is not changed."""
    if _depth > 32:
        return REDACTED
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, bytes | bytearray):
        # Raw bodies may be Secrets or kubeconfigs; they are never worth the risk.
        return REDACTED if value else value
    if isinstance(value, Mapping):
        return _redact_mapping(value, _depth)
    if isinstance(value, list | tuple | set | frozenset):
        items = [_redact_pair_or_item(item, _depth) for item in value]
        return items if isinstance(value, list) else tuple(items)
    return value


def _redact_pair_or_item(item: Any, depth: int) -> Any:
    # Header lists: [("Authorization", "Bearer ..."), ...]
    if (
        isinstance(item, tuple)
        and len(item) == 2
        and isinstance(item[0], str | bytes)
        and is_secret_key(item[0].decode("latin-1") if isinstance(item[0], bytes) else item[0])
    ):
        return (item[0], REDACTED)
    return redact(item, depth + 1)


def _redact_mapping(mapping: Mapping[Any, Any], depth: int) -> dict[Any, Any]:
    is_secret_object = mapping.get("kind") == "Secret"
    result: dict[Any, Any] = {}
    for key, value in mapping.items():
        if isinstance(key, str) and is_secret_key(key) and value not in (None, "", b""):
            result[key] = REDACTED
        elif is_secret_object and key in _SECRET_PAYLOAD_KEYS and isinstance(value, Mapping):
            result[key] = {name: REDACTED for name in value}
        elif key == _LAST_APPLIED and isinstance(value, str) and '"Secret"' in value:
            result[key] = REDACTED
        else:
            result[key] = redact(value, depth + 1)
    return result


def redact_secrets(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """structlog processor: scrub secrets from every value of the event (and nested values)."""
    for key, value in list(event_dict.items()):
        if key.startswith("_"):  # structlog/stdlib internals such as _record
            continue
        if is_secret_key(key) and value not in (None, "", b""):
            event_dict[key] = REDACTED
        else:
            event_dict[key] = redact(value)
    return event_dict


# ---------------------------------------------------------------------------------------------
# Configuration.


# The LogRecord attribute that carries an event's fields from get_logger's loggers to the formatter:
# one attribute, so that no field name can clash with a LogRecord attribute ("name", "message").
_FIELDS = "agent_log_fields"


def _to_stdlib_call(
    _logger: WrappedLogger, _method: str, event_dict: EventDict
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Last processor of our loggers: the arguments of the stdlib call that logs the event."""
    message = event_dict.pop("event", "")
    args = event_dict.pop("positional_args", ())
    kwargs = {key: event_dict.pop(key) for key in _STDLIB_KEYWORDS if key in event_dict}
    return (message, *args), {**kwargs, "extra": {_FIELDS: event_dict}}


_STDLIB_KEYWORDS = ("exc_info", "stack_info", "stacklevel")
# The context-local fields (a reconcile's work and id) ride in the record with the event's own,
# so that what reads the records (pytest's caplog) sees them as the output does.
_TO_STDLIB: list[Processor] = [
    structlog.stdlib.filter_by_level,
    structlog.contextvars.merge_contextvars,
    _to_stdlib_call,
]


def _unpack_fields(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """Formatter processor: the fields of an event from get_logger's loggers, back as keys."""
    fields = event_dict.pop(_FIELDS, None)
    if isinstance(fields, dict):
        event_dict.update(fields)
    return event_dict


def _drop_color_message(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    event_dict.pop("color_message", None)  # uvicorn/aiohttp-style duplicate message
    return event_dict


def _use_json(log_format: str, stream: TextIO) -> bool:
    if log_format == "json":
        return True
    if log_format == "console":
        return False
    try:
        return not stream.isatty()
    except (AttributeError, ValueError):
        return True


def configure_logging(
    *, verbosity: int = 0, log_format: str = "auto", stream: TextIO | None = None
) -> None:
    """Set up structlog and the stdlib root logger. Safe to call more than once (tests)."""
    out = stream if stream is not None else sys.stdout
    as_json = _use_json(log_format, out)
    level = level_for_verbosity(verbosity)

    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]
    # Exceptions are turned into data before redaction so their messages are scrubbed too. No
    # locals in tracebacks: they would carry tokens and keys.
    exceptions: Processor = (
        structlog.processors.ExceptionRenderer(
            structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
        )
        if as_json
        else structlog.processors.format_exc_info
    )
    renderer: Processor = (
        structlog.processors.JSONRenderer()
        if as_json
        else structlog.dev.ConsoleRenderer(colors=_is_tty(out))
    )

    # structlog.get_logger() (a library's, a test's) takes the same path as get_logger().
    structlog.configure(
        processors=_TO_STDLIB,
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )

    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[
            *shared,
            structlog.stdlib.ExtraAdder(),
            _unpack_fields,
            _drop_color_message,
            exceptions,
            redact_secrets,
        ],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
    )
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    library_level = library_level_for_verbosity(verbosity)
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(max(library_level, level))
    logging.captureWarnings(True)


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def get_logger(name: str, **context: Any) -> structlog.stdlib.BoundLogger:
    """The logger of a module (`get_logger(__name__)`): structlog's stdlib BoundLogger on the stdlib
    logger `name`, whatever structlog's global configuration is (tests reset it)."""
    return structlog.stdlib.BoundLogger(logging.getLogger(name), _TO_STDLIB, context)


# Context-local fields: the app binds the cluster for its whole run, and each reconcile its own
# fields (agent.kube.controller) for every line logged while it runs, by the modules it calls
# and by libraries alike: no logger is handed down.
bind_contextvars = structlog.contextvars.bind_contextvars
bound_contextvars = structlog.contextvars.bound_contextvars
clear_contextvars = structlog.contextvars.clear_contextvars

# What a reconcile binds (besides the cluster, which is the agent's): its object and its id.
RECONCILE_FIELDS = ("work", "reconcile_id")


def outside_reconcile() -> contextvars.Context:
    """A copy of the current context without a reconcile's fields: the context of a task that
    outlives the reconcile that happens to start it (a connection, a writer), whose lines are
    not that reconcile's."""
    context = contextvars.copy_context()
    context.run(structlog.contextvars.unbind_contextvars, *RECONCILE_FIELDS)
    return context


__all__ = [
    "RECONCILE_FIELDS",
    "REDACTED",
    "bind_contextvars",
    "bound_contextvars",
    "clear_contextvars",
    "configure_logging",
    "get_logger",
    "is_secret_key",
    "level_for_verbosity",
    "outside_reconcile",
    "redact",
    "redact_secrets",
    "redact_text",
]
