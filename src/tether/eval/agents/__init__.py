"""Agent plug-ins: openai, anthropic, replay, baseline (see base.py for the interface)."""

from tether.eval.agents.base import Agent, AgentContext, AgentError, Answer, make_agent, register

__all__ = ["Agent", "AgentContext", "AgentError", "Answer", "make_agent", "register"]
