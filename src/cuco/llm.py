"""LLM access over litellm: weighted models, per-call and outer timeouts, retries, cost, a USD budget cap, and a
record/replay cache (`cuco.llm_replay`) so that a run can be replayed offline bit for bit.

litellm is imported lazily (first call), after setting LITELLM_LOCAL_MODEL_COST_MAP so that the import never
downloads a price list.
"""

from __future__ import annotations

import os
import queue
import random
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import attrs

from cuco.errors import CucoError
from cuco.llm_replay import CACHE_MODES, LLMReply, ReplayCache, prompt_key  # noqa: F401  (public here too)

class LLMError(CucoError):
    """An LLM call failed (provider error, bad reply); the message names the model and the fix."""


class LLMConfigError(LLMError):
    """The LLM configuration cannot work: unknown model, missing API key, litellm not installed, no price."""


class LLMBudgetError(LLMError):
    """The USD budget cap would be exceeded by this call; no call was made."""


class LLMTimeoutError(LLMError):
    """A call ran past its outer hard timeout and was abandoned."""


class ReplayMissError(LLMError):
    """Replay mode met a prompt that the cache does not hold."""


def _models(value: Any) -> tuple[tuple[str, float], ...]:
    """Accepts 'model', ['m1', 'm2'], {'m1': 3, 'm2': 1} or [('m1', 3), ('m2', 1)]."""
    if isinstance(value, str):
        value = [(value, 1.0)]
    elif isinstance(value, Mapping):
        value = list(value.items())
    out = []
    for item in value:
        name, weight = (item, 1.0) if isinstance(item, str) else (item[0], float(item[1]))
        out.append((str(name), weight))
    return tuple(out)


def _check_models(_inst: Any, _attr: Any, value: tuple[tuple[str, float], ...]) -> None:
    if not value:
        raise LLMConfigError("LLMConfig.models is empty; name at least one litellm model, e.g. 'openai/gpt-4o'")
    for name, weight in value:
        if not name or weight <= 0:
            raise LLMConfigError(f"model entry ({name!r}, {weight}) is invalid; use a model name and a weight > 0")


@attrs.frozen
class LLMConfig:
    """Which models (weighted), sampling defaults, timeouts, retries and the USD budget cap.

    prices: {model: (usd_per_input_token, usd_per_output_token)} for models litellm's cost map does not know.
    """

    models: tuple[tuple[str, float], ...] = attrs.field(converter=_models, validator=_check_models)
    temperature: float = 0.5
    max_tokens: int = attrs.field(default=8192, validator=attrs.validators.gt(0))
    timeout_s: float = attrs.field(default=120.0, validator=attrs.validators.gt(0))
    outer_timeout_s: float = attrs.field(default=300.0, validator=attrs.validators.gt(0))
    max_retries: int = attrs.field(default=2, validator=attrs.validators.ge(0))
    backoff_s: float = attrs.field(default=1.0, validator=attrs.validators.ge(0))
    budget_usd: float | None = None
    prices: Mapping[str, tuple[float, float]] = attrs.field(factory=dict)
    cache_path: str | None = None
    cache_mode: str = attrs.field(default="off", validator=attrs.validators.in_(CACHE_MODES))
    max_reply_chars: int = attrs.field(default=256 * 1024, validator=attrs.validators.gt(0))
    max_abandoned_calls: int = attrs.field(default=2, validator=attrs.validators.ge(1))

    def to_dict(self) -> dict[str, Any]:
        """The configuration as a JSON-ready dict."""
        d = attrs.asdict(self)
        d["models"] = [list(m) for m in self.models]
        d["prices"] = {k: list(v) for k, v in self.prices.items()}
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "LLMConfig":
        """The configuration stored by `to_dict`."""
        d = dict(d)
        d["prices"] = {k: tuple(v) for k, v in d.get("prices", {}).items()}
        return cls(**d)


def import_litellm() -> Any:
    """litellm, imported with the local price map (never a download); a clear error if it is missing."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm  # noqa: PLC0415 (lazy on purpose: keeps `import cuco` cheap)
    except ImportError:
        raise LLMConfigError("litellm is not installed; pip install 'cuco[llm]' (litellm>=1.70,<1.107)") from None
    return litellm


_RETRYABLE = ("RateLimitError", "APIConnectionError", "Timeout", "InternalServerError", "ServiceUnavailableError",
              "BadGatewayError", "APIError")
_PRICE_FIX = ("give its price: `cuco run ... --price-per-mtok IN,OUT` (USD per million tokens), or "
              "LLMConfig(prices={{{model!r}: (usd_per_input_token, usd_per_output_token)}}), or budget_usd=None")
#: Fatal errors that no other prompt can avoid (the key, the account, the model): the run stops asking.
_ACCOUNT_FATAL = ("AuthenticationError", "PermissionDeniedError", "NotFoundError", "PaymentRequiredError")
_FATAL = {
    "AuthenticationError": "the provider rejected the API key; check the key variable for this provider",
    "PermissionDeniedError": "the API key has no access to this model; use another model or key",
    "NotFoundError": "the provider does not know this model; check the model name (provider/model)",
    "BadRequestError": "the provider rejected the request; check the model name and parameters",
    "ContextWindowExceededError": "the prompt is longer than the model's context; use a model with a longer "
                                  "context or fewer inspirations",
    "ContentPolicyViolationError": "the provider's content filter refused the prompt",
    "PaymentRequiredError": "the provider account has no credit left",
}


class LLMClient:
    """Completes chat prompts within the configured budget; thread-safe.

    `completion_fn` defaults to litellm.completion; `cost_fn` to litellm.completion_cost.
    """

    def __init__(self, config: LLMConfig, completion_fn: Callable[..., Any] | None = None,
                 cost_fn: Callable[[Any], float] | None = None, sleep: Callable[[float], None] = time.sleep,
                 ledger: Any = None):
        self.config = config
        self.ledger = ledger  # a cuco.spend.SpendLedger: the cap then holds across processes of one run
        self._completion_fn = completion_fn
        self._cost_fn = cost_fn
        self._sleep = sleep
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)
        self._abandoned: list[threading.Thread] = []  # calls given up at the outer timeout, maybe still running
        self._spent = ledger.total_usd() if ledger is not None else 0.0
        self._reserved = 0.0
        self._checked: set[str] = set()
        self._config_checked = False  # check() passed once: the configuration does not change
        self.calls = 0
        self.cache: ReplayCache | None = None
        if config.cache_mode != "off":
            if not config.cache_path:
                raise LLMConfigError(f"cache_mode={config.cache_mode!r} needs cache_path (a .jsonl file)")
            if config.cache_mode == "replay" and not Path(config.cache_path).exists():
                raise LLMConfigError(f"replay cache {config.cache_path} does not exist; record a run first "
                                     "(cache_mode='record') or give the right path")
            self.cache = ReplayCache(config.cache_path)

    # -- accounting ------------------------------------------------------------------------------------
    @property
    def spent_usd(self) -> float:
        """USD spent by settled calls so far; with a ledger, the run's earlier processes included."""
        with self._lock:
            return self._spent

    def remaining_usd(self) -> float | None:
        """USD left under the cap after spending and the calls in flight; None when there is no cap."""
        if self.config.budget_usd is None:
            return None
        with self._lock:
            return self.config.budget_usd - self._spent - self._reserved

    def exhausted(self) -> bool:
        """True once money spent (not money held for calls in flight) has reached the cap."""
        cap = self.config.budget_usd
        return cap is not None and self.spent_usd >= cap

    def choose_model(self, rng: random.Random | None = None) -> str:
        """A model drawn by the configured weights (from a fixed seed when `rng` is None)."""
        names = [m for m, _ in self.config.models]
        weights = [w for _, w in self.config.models]
        return (rng or random.Random(0)).choices(names, weights)[0]

    def _prices(self, litellm: Any, model: str) -> tuple[float, float] | None:
        if model in self.config.prices:
            return tuple(self.config.prices[model])  # type: ignore[return-value]
        for name in (model, model.split("/", 1)[-1]):
            info = litellm.model_cost.get(name)
            if info and "input_cost_per_token" in info and "output_cost_per_token" in info:
                return float(info["input_cost_per_token"]), float(info["output_cost_per_token"])
        return None

    def worst_case_usd(self, litellm: Any, model: str, messages: Sequence[Mapping[str, str]]) -> float:
        """Upper bound of one call's cost: the prompt (with margin) plus max_tokens of output."""
        prices = self._prices(litellm, model)
        if prices is None:
            if self.config.budget_usd is None:
                return 0.0
            raise LLMConfigError(
                f"model {model!r} has no price in litellm's cost map, so the budget cap cannot be enforced; "
                f"{_PRICE_FIX.format(model=model)}")
        try:
            n_in = litellm.token_counter(model=model, messages=list(messages))
        except Exception:  # unknown tokenizer: count characters, an over-estimate of tokens
            n_in = sum(len(m.get("content", "")) for m in messages)
        n_in = int(n_in * 1.1) + 32
        return n_in * prices[0] + self.config.max_tokens * prices[1]

    def _reserve(self, amount: float, model: str) -> str:
        """Hold `amount` against the cap (and in the run's ledger); returns the reservation's id."""
        with self._settled:
            cap = self.config.budget_usd
            deadline = time.monotonic() + self.config.outer_timeout_s
            while cap is not None and self._spent + self._reserved + amount > cap:
                # Only money spent exhausts the cap; calls in flight usually cost far less than their
                # worst case, so wait for them to settle rather than switch the LLM off for the run.
                left = deadline - time.monotonic()
                if self._spent + amount > cap or self._reserved == 0 or left <= 0:
                    raise LLMBudgetError(
                        f"LLM budget cap ${cap:.4f} reached (spent ${self._spent:.4f}, in flight "
                        f"${self._reserved:.4f}, this {model} call could cost up to ${amount:.4f}); raise budget_usd "
                        "or continue without LLM")
                self._settled.wait(left)
            self._reserved += amount
        return self.ledger.reserve(amount, model) if self.ledger is not None else ""

    def _settle(self, reserved: float, actual: float, rid: str = "", tokens: tuple[int, int] = (0, 0)) -> None:
        if self.ledger is not None and rid:
            self.ledger.settle(rid, actual, *tokens)
        with self._settled:
            self._reserved -= reserved
            self._spent += actual
            self._settled.notify_all()

    # -- checks ----------------------------------------------------------------------------------------
    def _check_model(self, litellm: Any, model: str, mocked: bool) -> None:
        if model in self._checked:
            return
        try:
            litellm.get_llm_provider(model)
        except Exception:
            raise LLMConfigError(f"unknown model {model!r}: litellm cannot tell its provider; write it as "
                                 "provider/model, e.g. 'openai/gpt-4o' or 'anthropic/claude-sonnet-4-5'") from None
        if not mocked:
            env = litellm.validate_environment(model)
            if not env.get("keys_in_environment", True):
                raise LLMConfigError(f"model {model!r} needs {', '.join(env.get('missing_keys', []))} in the "
                                     "environment; export the provider's API key and retry")
        self._checked.add(model)

    def check(self) -> None:
        """Fail fast, before any prompt is sent: every configured model must name a known provider, have its API
        key in the environment (unless a completion function is injected) and, under a budget cap, a price.
        Replay mode needs none of that and checks nothing. Raises LLMConfigError naming the model and the fix."""
        if self._config_checked or (self.cache is not None and self.config.cache_mode == "replay"):
            return
        litellm = import_litellm()
        for model, _weight in self.config.models:
            self._check_model(litellm, model, mocked=self._completion_fn is not None)
            if self.config.budget_usd is not None and self._prices(litellm, model) is None:
                raise LLMConfigError(
                    f"model {model!r} has no price in litellm's cost map, so the budget cap cannot be enforced; "
                    f"{_PRICE_FIX.format(model=model)}")
        self._config_checked = True

    # -- the call --------------------------------------------------------------------------------------
    def complete(self, messages: Sequence[Mapping[str, str]], temperature: float | None = None, *,
                 model: str | None = None, rng: random.Random | None = None, key_extra: str = "",
                 **kwargs: Any) -> LLMReply:
        """One chat completion. kwargs go to litellm.completion (e.g. mock_response in tests)."""
        temp = self.config.temperature if temperature is None else float(temperature)
        model = model or self.choose_model(rng)
        key = prompt_key(model, messages, temp, self.config.max_tokens, key_extra)
        if self.cache is not None and self.config.cache_mode == "replay":
            hit = self.cache.next(key)
            if hit is None:
                raise ReplayMissError(
                    f"replay cache {self.cache.path} has no answer for this {model} prompt (hash {key[:12]}); the "
                    "run diverged from the recorded one: use the same seed, config and inputs, or record again")
            rid = self._reserve(0.0, model)
            self._settle(0.0, float(hit["cost_usd"]), rid,  # charged as recorded, so budget decisions replay too
                         (int(hit.get("prompt_tokens", 0)), int(hit.get("completion_tokens", 0))))
            return LLMReply(hit["text"], hit["model"], float(hit["cost_usd"]), True,
                            int(hit.get("prompt_tokens", 0)), int(hit.get("completion_tokens", 0)))
        litellm = import_litellm()
        self._check_model(litellm, model, "mock_response" in kwargs or self._completion_fn is not None)
        reply = self._with_retries(litellm, model, messages, temp, kwargs)
        if self.cache is not None:
            self.cache.put(key, reply)
        return reply

    def _with_retries(self, litellm: Any, model: str, messages: Sequence[Mapping[str, str]], temp: float,
                      kwargs: dict[str, Any]) -> LLMReply:
        last: Exception | None = None
        for attempt in range(self.config.max_retries + 1):
            if attempt:
                self._sleep(self.config.backoff_s * 2 ** (attempt - 1))
            try:
                return self._one_call(litellm, model, messages, temp, kwargs)
            except (LLMBudgetError, LLMConfigError, LLMTimeoutError):
                raise
            except Exception as exc:  # provider errors: classify by litellm's exception class name
                name = type(exc).__name__
                if name in _FATAL or any(name == f or name.endswith(f) for f in _FATAL):
                    hint = _FATAL.get(name, "")
                    if any(name.endswith(f) for f in _ACCOUNT_FATAL):
                        raise LLMConfigError(f"{model}: {name}: {_short(exc)}; {hint}") from None
                    raise LLMError(f"{model}: {name}: {_short(exc)}; {hint}") from None
                if name not in _RETRYABLE and not isinstance(exc, (TimeoutError, ConnectionError)):
                    raise LLMError(f"{model}: unexpected {name}: {_short(exc)}") from None
                last = exc
        raise LLMError(f"{model}: gave up after {self.config.max_retries + 1} attempts; last error "
                       f"{type(last).__name__}: {_short(last)}; retry later or raise max_retries")

    def _one_call(self, litellm: Any, model: str, messages: Sequence[Mapping[str, str]], temp: float,
                  kwargs: dict[str, Any]) -> LLMReply:
        self._abandoned = [t for t in self._abandoned if t.is_alive()]
        if len(self._abandoned) >= self.config.max_abandoned_calls:
            # each abandoned call holds a thread we cannot kill: a provider that hangs is not asked again
            raise LLMConfigError(f"{model}: {len(self._abandoned)} calls are still hanging past the outer timeout; "
                                 "the provider is not answering, so the run goes on without the LLM")
        worst = self.worst_case_usd(litellm, model, messages)
        rid = self._reserve(worst, model)
        fn = self._completion_fn or litellm.completion
        box: "queue.Queue[tuple[bool, Any]]" = queue.Queue(maxsize=1)

        def target() -> None:
            try:
                box.put((True, fn(model=model, messages=list(messages), temperature=temp,
                                  max_tokens=self.config.max_tokens, timeout=self.config.timeout_s, **kwargs)))
            except BaseException as exc:  # handed to the caller
                box.put((False, exc))

        # A daemon thread we can abandon: the outer timeout holds even if the provider ignores its own.
        worker = threading.Thread(target=target, daemon=True, name=f"llm-{model}")
        worker.start()
        self.calls += 1
        try:
            ok, value = box.get(timeout=self.config.outer_timeout_s)
        except queue.Empty:
            self._abandoned.append(worker)
            self._settle(worst, worst, rid)  # the abandoned call may still be billed: count its worst case
            raise LLMTimeoutError(f"{model}: no answer within the outer timeout of {self.config.outer_timeout_s:.0f} s; "
                                  "the call was abandoned (raise outer_timeout_s or use a faster model)") from None
        if not ok:
            self._settle(worst, 0.0, rid)
            raise value
        try:
            text = value.choices[0].message.content or ""
        except (AttributeError, IndexError, KeyError):
            self._settle(worst, 0.0, rid)
            raise LLMError(f"{model}: the reply has no message content; retry or use another model") from None
        cost = self._cost(litellm, value, model, worst)
        usage = getattr(value, "usage", None)
        tokens = (int(getattr(usage, "prompt_tokens", 0) or 0), int(getattr(usage, "completion_tokens", 0) or 0))
        self._settle(worst, cost, rid, tokens)
        if len(text) > self.config.max_reply_chars:
            raise LLMError(f"{model}: a reply of {len(text)} characters is over max_reply_chars="
                           f"{self.config.max_reply_chars}; it is not used or stored")
        return LLMReply(text, model, cost, False, *tokens)

    def _cost(self, litellm: Any, response: Any, model: str, worst: float) -> float:
        if model in self.config.prices:
            usage = getattr(response, "usage", None)
            pin, pout = self.config.prices[model]
            return (getattr(usage, "prompt_tokens", 0) or 0) * pin + (getattr(usage, "completion_tokens", 0) or 0) * pout
        try:
            return float((self._cost_fn or (lambda r: litellm.completion_cost(completion_response=r)))(response))
        except Exception:
            return worst  # price unknown after the fact: charge the bound, never less


def _short(exc: BaseException | None, limit: int = 300) -> str:
    from cuco.redact import redact  # provider errors can echo the key they were given

    text = redact(" ".join(str(exc).split()))
    return text if len(text) <= limit else text[:limit] + "..."
