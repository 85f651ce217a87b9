"""Karmada's resource interpreter on the agent's side: user and bundled Lua customizations in
a sandbox, ahead of the built-in rules of agent.karmada."""

from .chain import Interpreter, InterpretError

__all__ = ["InterpretError", "Interpreter"]
