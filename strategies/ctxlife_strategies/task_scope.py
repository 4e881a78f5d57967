"""``task_scope``: decide what each task receives from the tasks before it.

What it does, its options and why: docs/strategies/task_scope.md.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field

import ctxlife
from ctxlife.messages import escape_surrogates
from ctxlife.models import Complete, configured_completion, model_api, model_route_problem
from ctxlife.summarizers import Summarizer, SummaryRequest, available_summarizers, get_summarizer, truncate_to_tokens

Policy = Literal["carry", "isolate", "full"]
_DIVIDER_RE = re.compile(r"\n\n-{3,}\n\n")  # how CrewAI separates the outputs it passes on
_SPEAKER_RE = re.compile(r"(?m)^Assistant: ")
_KEEP_OUTPUTS = 64
OUTPUTS_BLOB = "task_scope.outputs"  # the session blob holding the recorded outputs
_MIN_PART_TOKENS = 16


class TaskScope(ctxlife.Strategy):
    """Carry a compact version of earlier task outputs (or none, or all) into each task."""

    name = "task_scope"

    class Options(ctxlife.Options):
        policy: Policy = Field(
            "carry",
            description=(
                'What a task receives from earlier tasks: "carry" (a compact version within max_tokens), '
                '"isolate" (nothing) or "full" (everything, CrewAI\'s behaviour).'
            ),
        )
        tasks: dict[ctxlife.NonBlankStr, Policy] = Field(
            default_factory=dict,
            description=(
                "Per-task policies: a table of task name (or 0-based task index) = policy; tasks not listed use policy."
            ),
        )
        max_tokens: int = Field(
            500,
            ge=50,
            description="Token budget of the carried context, and of each task's recorded output summary.",
        )
        summarizer: str = Field(
            "extractive",
            min_length=1,
            description=(
                'Summarizer for "carry" (see ctxlife.summarizers): "extractive" (offline) or "llm" '
                "(the config's [model] when it names one, else the agent's model when the framework offers one, "
                "else extractive)."
            ),
        )

    options: Options

    def __init__(
        self, options: TaskScope.Options | None = None, settings: ctxlife.SharedSettings | None = None
    ) -> None:
        super().__init__(options, settings)
        opts = self.options
        self._by_key = {key.strip().casefold(): policy for key, policy in opts.tasks.items()}
        self._extractive = get_summarizer("extractive")
        if opts.summarizer not in ("extractive", "llm"):
            if opts.summarizer not in available_summarizers():
                raise ctxlife.ConfigError(
                    f"strategy 'task_scope' option 'summarizer': unknown summarizer {opts.summarizer!r}; "
                    f"available: {', '.join(available_summarizers())}"
                )
            self._custom: Summarizer | None = get_summarizer(opts.summarizer)
        else:
            self._custom = None
        self._model: Complete | None = None

    def route_problem(self, connect: bool = False) -> str | None:
        """Why the ``[model]`` this strategy calls ("llm" summarizer) cannot be called, with the fix; None if it
        can or none is called (``ctxlife check``)."""
        if self.options.summarizer != "llm" or model_api(self.settings.model) is None:
            return None
        return model_route_problem(self.settings.model, connect=connect)

    def _configured_model(self, budget: int) -> Complete | None:
        """The ``[model]`` table's model (built once), None when the table names none."""
        if self._model is None and model_api(self.settings.model) is not None:
            table = self.settings.model
            if model_api(table) == "openai":
                self._model = configured_completion(table)
            else:  # crewai.LLM, through the adapter (only an adapter imports crewai)
                options = {"max_tokens": budget, **table.options}
                self._model = ctxlife.completion_for_model(str(table.name), timeout=table.timeout_seconds, **options)
        return self._model

    # -- policy ---------------------------------------------------------------------------

    def policy_for(self, task_name: str | None, task_index: int | None) -> Policy:
        """The policy of a task: by name, then by index, else the default."""
        if task_name is not None:
            found = self._by_key.get(task_name.strip().casefold())
            if found is not None:
                return found
        if task_index is not None:
            found = self._by_key.get(str(task_index))
            if found is not None:
                return found
        opts = self.options
        return opts.policy

    # -- hooks ----------------------------------------------------------------------------

    @ctxlife.hookimpl
    def ctxlife_task_start(self, ctx: ctxlife.TaskContext) -> None:
        # Lone surrogates (UTF-8 cannot carry them) are escaped in what ctxlife writes for the model.
        text = escape_surrogates(ctx.context_text or "")
        if not text.strip():
            return
        policy = self.policy_for(ctx.task_name, ctx.task_index)
        count = ctx.tokens.count_text
        if policy == "full":
            return
        if policy == "isolate":
            ctx.context_text = ""
            ctx.record("isolated", task_index=ctx.task_index, removed_tokens=count(text))
            return
        opts = self.options
        before = count(text)
        if before <= opts.max_tokens:
            return
        ctx.context_text = self.compact(text, opts.max_tokens, count, ctx)
        ctx.record("carried", task_index=ctx.task_index, tokens_before=before, tokens_after=count(ctx.context_text))

    @ctxlife.hookimpl
    def ctxlife_task_end(self, ctx: ctxlife.TaskContext) -> None:
        output = ctx.output or ""
        count = ctx.tokens.count_text
        opts = self.options
        tokens = count(output)
        if tokens <= opts.max_tokens:
            summary = output
        else:
            summary = self.summarize(escape_surrogates(output), opts.max_tokens, count, ctx)
        outputs = self.outputs(ctx)
        outputs.append(
            {
                "task_index": ctx.task_index,
                "task_name": ctx.task_name,
                "agent_role": ctx.agent_role,
                "tokens": tokens,
                "digest": _digest(output),
                "summary": summary,
            }
        )
        del outputs[:-_KEEP_OUTPUTS]
        saved_in = "state"
        if ctx.store is not None and ctx.session_id:
            try:
                ctx.store.put_blob(ctx.session_id, OUTPUTS_BLOB, json.dumps(outputs, ensure_ascii=False))
                saved_in = "session"
            except Exception as exc:  # noqa: BLE001 - the record stays in memory; say why it was not saved
                ctx.record("save_failed", error=type(exc).__name__)
        ctx.record(
            "recorded", task_index=ctx.task_index, tokens=tokens, summary_tokens=count(summary), saved_in=saved_in
        )

    def outputs(self, ctx: Any) -> list[dict[str, Any]]:
        """The session's recorded task outputs, oldest first (loaded from the session store once)."""
        outputs: list[dict[str, Any]] | None = ctx.state.get("outputs")
        if outputs is None:
            outputs = []
            if getattr(ctx, "store", None) is not None and ctx.session_id:
                try:
                    blob = ctx.store.get_blob(ctx.session_id, OUTPUTS_BLOB)
                    loaded = json.loads(blob) if blob else []
                    outputs = [o for o in loaded if isinstance(o, dict)] if isinstance(loaded, list) else []
                except Exception as exc:  # noqa: BLE001 - start afresh rather than fail the task
                    ctx.record("load_failed", error=type(exc).__name__)
            ctx.state["outputs"] = outputs
        return outputs

    # -- compaction -----------------------------------------------------------------------

    def compact(self, text: str, budget: int, count: Callable[[str], int], ctx: Any = None) -> str:
        """Fit the earlier outputs in ``text`` into ``budget`` tokens, each output in its share."""
        parts = [p for p in _DIVIDER_RE.split(text) if p.strip()]
        recorded = {o.get("digest"): o for o in (self.outputs(ctx) if ctx is not None else [])}
        header = f"[ctxlife: earlier task outputs, compacted from {count(text)} tokens]"
        labels: list[str] = []
        for part in parts:
            found = recorded.get(_digest(part))
            name = found.get("task_name") if found else None
            labels.append(f"From task {_short(name)!r}:" if name else "")
        fixed = count(header) + sum(count(label) + 2 for label in labels) + 2 * len(parts)
        share = max(_MIN_PART_TOKENS, (budget - fixed) // max(len(parts), 1))
        pieces = [header]
        for part, label in zip(parts, labels, strict=True):
            found = recorded.get(_digest(part))
            summary = found.get("summary") if found else None
            if summary is None or count(summary) > share:
                summary = part if count(part) <= share else self.summarize(part, share, count, ctx)
            pieces.append(f"{label}\n{summary}" if label else summary)
        out = "\n\n".join(pieces)
        return out if count(out) <= budget else truncate_to_tokens(out, budget, count)

    def summarize(self, text: str, budget: int, count: Callable[[str], int], ctx: Any = None) -> str:
        """Summarize ``text`` within ``budget`` tokens; cut it if the summarizer fails."""
        opts = self.options
        summarizer: Any = self._custom or self._extractive
        if opts.summarizer == "llm":
            complete = self._configured_model(budget) or getattr(ctx, "complete", None)
            if complete is not None:
                summarizer = get_summarizer("llm", complete=complete)
            elif ctx is not None:
                ctx.record("summarizer_fallback", wanted="llm", used="extractive")
        request = SummaryRequest(
            messages=[{"role": "assistant", "content": text}],
            previous_summary=None,
            max_tokens=budget,
            count_tokens=count,
        )
        try:
            summary = summarizer.summarize(request)
        except Exception as exc:  # noqa: BLE001 - a failed summary falls back to a cut, never to nothing
            if ctx is not None:
                ctx.record("summary_failed", error=type(exc).__name__)
            summary = ""
        summary = _SPEAKER_RE.sub("", summary or "").strip()  # the output is one speaker's text
        if not summary or count(summary) > budget:
            return truncate_to_tokens(text, budget, count)
        return summary


def _digest(text: str) -> str:
    return hashlib.sha256(escape_surrogates(text.strip()).encode("utf-8")).hexdigest()[:16]


def _short(name: str | None, limit: int = 60) -> str:
    name = " ".join((name or "").split())
    return name if len(name) <= limit else name[: limit - 1] + "…"
