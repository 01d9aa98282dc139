"""hostir's exception classes. Every message names the op or input at fault
and says what was expected and what was given."""


class HostirError(Exception):
    """Base class of every error hostir raises on purpose."""


class DefinitionError(HostirError, ValueError):
    """A fusion or host program is ill-formed (raised while it is defined)."""


class InputError(HostirError, ValueError):
    """Inputs passed to `execute` do not match the definition."""


class ExecutionError(HostirError, RuntimeError):
    """Running a program failed (a run-time extent mismatch, for example)."""


class UnsupportedError(HostirError, NotImplementedError):
    """A valid request that hostir does not implement (yet)."""


class UnsupportedAttribute(UnsupportedError, AttributeError):
    """An attribute nvFuser's API has and hostir does not (hasattr says False)."""


class VerificationError(HostirError, AssertionError):
    """The IR verifier found a malformed fusion (a bug in hostir or a pass)."""
