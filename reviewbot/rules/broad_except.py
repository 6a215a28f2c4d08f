"""Over-broad exception handling: `broad-except`, `runtime-error-fallback`, `caught-own-subclass`.

ruff (pinned, run once per review as a subprocess with JSON output, see `reviewbot.ruff`) reports
bare `except:` (E722) and blind `except Exception` (BLE001); this module classifies those handlers
and adds what ruff cannot know: handlers that log and fall back (ruff exempts them), handlers that
convert every error into another type, the torch rules for `except RuntimeError`, and builtin
handlers that also catch the repository's own exception subclasses (`reviewbot.exception_index`).

How a handler leaves: it *re-raises* when a statement directly in its body is a bare `raise` or
`raise <the caught name>` (the same exception goes on); it *converts* when such a statement raises
something else (`raise XUnsupportedError(...) from error`); otherwise it *swallows* (a raise under
a condition still swallows the other cases).

The severities below are what each finding claims; without confirming evidence the engine caps
everything above `P2` (`findings.apply_evidence_policy`), and the exception-injection experiment
may confirm or refute them.

- any handler, narrow ones included (round 24, `reviewbot.rules.dropped_raise`): the base's handler
  of the same try raised on every entry, the head's holds the same `raise` under a condition, and
  some way through it falls off its end having bound nothing the code after the try reads and
  changed nothing else: P2 `broad-except.raise-made-conditional` (optimum-intel's `except KeyError`
  that stopped raising for every model but Mistral's), before everything below.
- any handler, narrow ones included (round 25, `reviewbot.rules.fails_open`): it returns the boolean
  whose value, where the file uses the check, lets a removal of files run (`if not running:
  lock.unlink()`): P2 `broad-except.fails-open`, a safety check that fails open, next.
- round 27 (tuned on round 27's held-out parts A and B): a catch-all after narrow handlers of the
  errors a tenacity `@retry` of the try's callee retries without `reraise=True`
  (`reviewbot.rules.retry_wrapped`): P2 `broad-except.retry-error-skips-handlers`; a bare `except:`
  or `BaseException` after a clause catching `Exception` (`_after_catch_all`): P3
  `broad-except.exits-only`; a loop element converted in place that the handler leaves raw
  (`data_fallback.unconverted_element`): P2 `broad-except.element-left-unconverted`, all three
  before the catch-all's exemptions; for a narrow handler, an `except ImportError` binding an
  imported function to a do-nothing stub that the file calls for its effect
  (`import_unbound.noop_stub_called`): P2 `broad-except.import-noop-stub`, and (outside the
  `RuntimeError` family) one `if` on the caught exception with no `else:` and no `raise`, new in the
  change (`reviewbot.rules.partial_filter`): P2 `broad-except.filter-falls-through`. Nothing for a
  handler that binds names back to the constants they held before the `if` its try stands in
  (`own_route.reset_to_skipped`, an existing route) or keeps the error in the loop's results from a
  try that ends the turn inside `if` blocks (`_turn_ending_tries`).
- bare / `Exception` / `BaseException`:
  - falls through and leaves a name unbound: the handler binds nothing and does not leave, and the
    statement after the try reads a name only the try's body binds (`reviewbot.rules.fallthrough`):
    P2 `broad-except.unbound`, before any of the exemptions below (a probe whose comment names the
    expected failure still hands the code after it an unbound or stale name);
  - reads in its own body a name the try binds only after a statement that can fail (not bound
    before the try, nor by a leading `name = <constant or name>`, nor in the handler first;
    `reviewbot.rules.fallthrough`): P2 `broad-except.handler-unbound`, also before the exemptions
    (round 14, lm-evaluation-harness's request handler: `logger.error(f"{e} {outputs}"); raise`
    raises `UnboundLocalError` in place of every connection error);
  - re-raises: nothing, a bare `except:` included (round 11: until then P3, "it still catches
    `KeyboardInterrupt`"; but the handler passes Ctrl+C on after its cleanup, which should run then
    too: iree-turbine's fence signalled after a failed launch). Near miss: a bare `except:` that
    converts (below) stays P3 `broad-except.bare-reraises`, Ctrl+C becomes the new type;
  - `# noqa: BLE001` (or `E722`, `BLE`, `S110`, a blanket `# noqa`) with a reason after the codes or
    in comment lines directly above the `except`: P3 `broad-except.noqa-reason` (respected: the
    injection experiment may still show a programmer error swallowed silently); a noqa without a
    reason changes nothing;
  - rebuilds the caught exception from its class (`raise type(e)(msg)`, `e.__class__(...)`, with or
    without `.with_traceback(None)` and `from None`): P3 `broad-except.rebuilds` (`_rebuilds`); the
    same type reaches the caller, but with only the arguments passed again (a class whose
    constructor takes others fails there with a `TypeError`) and without its cause. Near miss:
    `raise ValueError(msg) from e`, a conversion to a fixed type (below);
  - converts: P0 `broad-except.converts` when some `except` clause of the revision catches the
    target type (or a repository base of it) without re-raising, on a call path from the converting
    function (its try body encloses the handler or calls that function, directly or through other
    functions of the revision: `ExceptionIndex.reaching`): every `AssertionError` becomes the target
    type and that caller takes it into its fallback; nothing when no such clause catches it (the
    converted error reaches the user, chained to the original), unless the target is by its name the
    "not supported here" signal (`NotImplementedError`, a class named `*Unsupported*`,
    `*NotSupported*`, `*Unimplemented*`): callers catch that to fall back whether or not they are in
    the revision (a dispatch layer, the library's users), so P2 `broad-except.converts-to-signal`
    (round 10; near miss: `raise ValueError(...) from e` that nothing here catches);
  - a *unit boundary* that reports the error: nothing. The handler logs the traceback
    (`logger.exception`, `exc_info=`) or, at warning level or above, the caught exception itself,
    or (round 21) ends the process with it as the exit message (`sys.exit(f"{e}")` prints it on
    stderr and exits with status 1, `_exits_with_error`; neural-speed's download scripts), or, for a
    turn of a loop, keeps the caught exception in the loop's results (a value built
    from it added to a collection: `out.append({"case": case, "error": repr(exc)})`);
    its other statements only `pass`, `continue`, `break`, `return`/`return None` or record a
    failure state or end the object it runs in (since round 20 `self.close()`, `self.shutdown()`:
    a server's connection closed on a bad message; an assignment or return of a name or attribute called error, failed, failure,
    aborted, ...; a call named for a failure, alone, assigned or returned,
    `metrics.increase_failed_requests(...)`, `outcome = failure(exc)`; a returned
    or yielded response carrying a failure marker as a keyword, `finish_reason="error"`, or since round
    16 a returned response carrying an HTTP error status, 400 to 599, `create_predict_response(None,
    ids, "Prediction failed", 503)`; ending the process with a failing status, `os._exit(1)`,
    `sys.exit(2)`; since round 16 these may stand in the branches of an `if`, TorchServe's "out of
    resources" for a CUDA error and "failed" for the others); and the unit it ends is one of: a
    turn of a loop (the try stands directly in a loop's body, or the handler ends with `continue`),
    teardown or diagnostics code (below), or a unit whose failure it records (a failed request, a
    failed child process). The project's own rule: a boundary of one unit of work may catch
    everything to mark that unit failed and keep going, and says so in the log;
  - a *filter*: the handler inspects the caught exception and re-raises what it does not recognise
    (`if should_retry(e): <retry> else: raise`, or `if not is_oom(e): raise` before the recovery;
    the test names the caught exception; or, round 14, an `assert` on it, a test's expected
    failure: `assert "Missing key(s)" in str(e)`): nothing, it is as narrow as the predicate (the
    OOM-retry decorator that halves the batch size). Since round 22 a filter on the error's text
    whose kept branch shows nothing (no print, warning or log above debug) and does more than bind
    a constant is P2 `broad-except.silent-filter` (`reviewbot.rules.error_text.silent_filter`; for
    `except RuntimeError` `runtime-error-fallback.silent-filter`), saying it is unconfirmed: what the
    matched failure leaves undone is skipped or replaced without a word. Near misses: a reported
    kept branch, `batch_size = 1`, a matched text saying the effect is in place ("already
    registered"), a predicate call;
  - a *guarded probe*: a try body of one operation (other statements only return or assign a
    constant) whose handler only passes, returns a constant or assigns one (logging allowed; not
    an implicit `None` in place of the try's returned result), and either a comment next to it
    (the lines directly above the `try`, inside the try body or in the handler) says which failure
    is expected ("will raise a RuntimeError if no XLA device is configured", "may fail in CPU-only
    containers", "not available", "can not be serialized", "could not be determined"; "# flag the
    error" is not one), or the statement right after the try warns
    (`warnings.warn`, logging at warning level or above), or (round 10, `except Exception` only) the
    one operation calls by simple name a function of this file that raises a named exception on
    purpose (`raise RuntimeError("not a TPU device")`; not `raise Exception(...)`), which states the
    expected failure in code (`_raises_on_purpose`): nothing. The try guards one operation and
    the fallback is a stated or announced default, not a hidden one (`import torch_npu` returning
    "not available"; a memory query that falls through to "the figure is incorrect" warning). An
    `if` without calls in its test that only falls back to constants (`if git_hash is None:
    git_hash = "UNKNOWN"`) normalises the operation's answer and is no second operation. A loop
    that writes into a container or object the try did not make (`_package_map[pkg].append(name)`
    into a module-level map) is one write per turn, not one operation (round 16, `_fills_in_turns`):
    a failure part way keeps the first turns' writes, a partial result where a complete one is
    expected (diffusers' package map, cached for the process), so the comment does not exempt it;
    since round 24 (`warned_flag.warned_flag_probe`) the warning may open the branch of the `if`
    after the try that the handler's flag leads to (`is_remote = False`, then `if is_local or
    is_remote: ... else: logger.warning(...)`: optimum-habana's PEFT base model check);
  - a *known answer* (round 15): a try that runs only library code (`runs_no_repository_code`),
    whose handler only logs or passes and answers with a constant the try itself answers with when
    nothing fails (`return None` where the try returns `None` for "not found"; `pass` falling
    through to the `return False` the try also reaches): nothing (`_known_answer`). Callers handle
    that answer already. Near misses: another constant (`"unknown"`), the repository's own code in
    the try;
  - a *cache miss* (round 22, `cache_read.cache_miss`): the try reads what its names call a cache
    (`open(_cache_file_path(name), "rb")`, `self._load(self._cache_file)`) and writes nothing, the
    handler only logs, removes files and answers "nothing cached" (a constant, or the function's
    implicit `None`): nothing; a failed read costs a recomputation from the source, not a wrong
    result (lm-evaluation-harness's request cache, Horovod's check cache). Near misses: a file not
    named a cache, a try that also writes the cache, a handler that computes a substitute;
  - an *undo of the code's own registration* (round 24, `undo_registration`): the try's one call
    undoes a registration (`deregister_*`, `unregister_*`) that the file makes with the same
    arguments, the handler only passing or logging: nothing, here and for `except RuntimeError`;
    on first use there is nothing to undo (apex's NCCL memory pool). Near miss: the registration
    itself in a try;
  - a *version probe*: the try only reads an imported library's version and works on it
    (`cudnn.backend_version() < N`, `map(int, cudnn.__version__.split(".")[:2])`), under
    `except Exception`, with a constant fallback: nothing; an unreadable version means the feature
    gated on it is not usable (`_version_probe`; any other call keeps the finding);
  - *alternatives tried in turn*: the try stands directly in a `for` loop, a success leaves the loop
    (`return`/`break` at the end of the try body or its `else:`), the handler only moves on
    (`continue`, `pass`, logging) and the loop's exhaustion raises (`else:` or the statements after
    the loop reach a `raise`, past assignments and logging): nothing (`_alternatives_tries`); every
    error reaches the caller unless another alternative gives the answer (attrs' `or_`). Near miss:
    a loop whose exhaustion returns a default stays reported. Unrolled (round 16,
    `error_reach.unrolled_alternatives`): a handler that only logs and binds one name to `None`, the
    statement right after the try testing that name, in a function that ends in `raise` and returns
    no `None` after the try (a tokenizer's pad id, else the model config's, else `ValueError`):
    nothing;
  - an *error handed on*: the handler returns the caught exception or its text as one element of a
    tuple result (`return str(e), float("inf")`: a candidate that loses a selection), its other
    statements only logging, and no caller in the changed files unpacks that element into `_` or
    drops the result: nothing, the failure travels with the result (`_hands_error_on`). Since round
    16 a caller that tests the handler's constant right after the unpacking (`status, response =
    search(q)`, `if status != 200: ret = "None"`, the handler returning `-1, str(e)`) and reads the
    error's target neither on the branch that constant takes nor after it drops the error too
    (`_failure_branch_drops`): the swallow;
  - a *failure record* (round 14, FastVideo's workers): the handler only binds, hands to a queue,
    list or future, or returns values built without calls (but `str`, `repr`, `type`, `format`,
    `traceback.format_exc`), one naming the caught exception and one saying the unit failed
    (`{"kind": "error", "error": repr(e)}`, `status = STATUS_INFRA_ERROR`, `"ok": False`): P3
    `broad-except.error-record` (the traceback is lost), nothing when the record or a log call keeps
    it (`_error_record`). Near misses: the error's text put with no failure marker, a record that
    also computes a substitute, a failure word only in a target's name (`self.compile_error =
    str(e)`): still the swallow;
  - an *optional third-party import*: a try of only imports of modules outside the repository that
    the file imports nowhere unguarded, the handler recording the absence in a constant
    (`_HAS_PIL = False`): nothing (`_optional_dependency`);
  - a *reported optional extension*: the try starts with an import of a module outside the
    repository and the handler reports every error but "not installed" with the error itself (a
    warning naming it, directly or under `if not isinstance(e, ImportError):`), otherwise binding
    only stand-ins (flags, `pkg = object`, stub classes and their instances): nothing
    (`_reported_optional_import`). Near miss: `if isinstance(e, ImportError): warn(e)` (the other
    errors silent) stays reported;
  - an *announced import failure*: a try of only imports, `except Exception` that only warns and
    binds nothing, the imported names bound nowhere else in the file: nothing, a use fails loudly
    with `NameError` (`_deferred_import_failure`);
  - an *optional wrapper at import*: at module level, one assignment rebinding a name to a wrapped
    version of itself (`k = triton.autotune(...)(k)`) with a `pass` handler: nothing, here and for
    `except RuntimeError`; the original stays (`_optional_rewrap`);
  - a *discarded write*: the handler logs the traceback and otherwise only removes files or
    directories (`shutil.rmtree(staging)`): nothing, the failed write is reported and nothing half
    written is published (`_discards_output`);
  - a *package probe*: the try's first statement looks up an installed distribution
    (`importlib.metadata.version/metadata/distribution/requires/files`, and since round 9 the
    listings `distributions/packages_distributions/entry_points`), its other statements only
    work on the answer (each call uses a name the try assigned), and the handler falls back to a
    constant: nothing; "not installed" is the expected case (`_package_probe`);
  - a *display placeholder* (round 9): in code that only builds text for display (`__repr__`,
    `__str__`, ..., and functions of the file called only from such code), a handler that only
    returns a constant (`return "{...}"`): nothing; a repr must not raise, and what it drops is
    text (`_display_functions`). The same helper also called from other code stays reported.
    Since round 11 the same for a helper whose answer can only word an error that is raised anyway
    (`_error_wording_functions`: called only where every way on raises, a statement of a function
    body from which it holds no `return` and ends in `raise`; taichi's `try_get_wheel_tag`, asked
    which message to raise). Near misses: the helper also called from code that goes on, or from a
    function that returns after the call;
  - a *fallback the function's docstring states* ("falls back to the original function if
    compilation fails"; or a swallow it states: "swallows any exception so that ...", "errors are
    ignored"; since round 14 one that calls itself "best-effort"), the handler handing back a value
    at hand (`return <name or constant>`, logging, `pass`): nothing; a substitute computed in the
    handler (`return fn(*args)`) stays reported (`_docstring_fallbacks`);
  - a *conversion through a helper*: the handler's last statement calls, or returns the call of, a
    function of the revision that always raises (`ExceptionIndex.always_raises`:
    `return self.environment.handle_exception()`): nothing, here and for `except RuntimeError`;
  - a *conversion after the try*: the handler only prepares the error (no `return`, `break`,
    `continue` or `raise` in it: `msg = f"{msg} ({e})"`) and falls through into an unconditional
    `raise X(...)` (`_falls_into_raise`): read as a handler converting to `X` (above: P0 only when a
    clause of the revision on its call path catches `X` without re-raising); for `except
    RuntimeError`: nothing;
  - a *confined try*: every call of the try body goes to a builtin on values at hand (`eval`,
    `repr`, `str`, `hash`, `open`; not `getattr`, `map`, ... which run code they are handed) or to the
    standard library (`stdlib_call_count` with `BUILTINS_AT_HAND`: a method of a value such a call
    returned counts, `with open(p) as f: f.read(4)`, and since round 11 a method of what such a
    method returned, to a fixed point, `line = f.readline()` then `line.split()`): nothing for
    `except Exception`, here and for the
    injection experiment's can-arise check, the same test. No code of the repository runs there, so no
    programmer error of it (an `AssertionError`, a `TypeError` of a wrong call) can be swallowed; what
    is caught is the library's failure of that operation (an unreadable file, a text that is no
    literal). A bare `except:` or `except BaseException:` there is P3
    `broad-except.confined-catches-exit`: it also takes `KeyboardInterrupt` and `SystemExit` (round 25:
    `broad-except.lookup-catches-exit` when the body calls nothing and reads an attribute of a value,
    which may run that object's own code, `_object_lookup`). Dunder
    methods the builtins run on their values (`__str__`, `__hash__`) and properties read in the body
    are not counted as the repository's code;
  - cleanup on the way out: a handler that only passes, returns or logs, in a try standing in a
    `finally:` clause, in `__del__`/`__exit__`/`__aexit__`, in a function the file hands to
    `atexit.register`, `signal.signal` or `weakref.finalize` (directly, or as the one call of a
    lambda handed over: `atexit.register(lambda *args: on_quit())`), or (round 20) before the `raise` that
    ends an `except` handler, an error path's clean-up (`_teardown_tries`): nothing; raising there
    would mask the error being handled or stop the rest of the teardown;
  - a *reported fallback*: the handler prints, warns or logs at warning level or above a message
    naming the caught exception (not only its class: `type(e)` drops the cause), and otherwise only falls back to a constant or falls through to
    the code after the try (not an implicit `None` replacing the try's returned result): nothing;
    the failure is visible with its cause, the fallback is a stated default or the function's own
    other route (a scalar build of an op, a slower conversion), not a substitute computed in the
    handler. Since round 10 the report may stand under a rank guard (`if not dist.is_initialized()
    or dist.get_rank() == 0: print(ex)`: one process of many reports; `if verbose:` does not count);
    since round 11 the handler may first prepare its report: an assignment to plain names that a
    later logging call of the handler reads, in a handler that ends with `return` (`arch =
    arch_name(arch)` before the warning, then `return False`; `_prepares_report`). Near miss: the
    same handler falling through, the rebound name reaching the code after the try. Since round 12
    the handler may also rebind a value at hand read without a call (`self._compiled = self._func`:
    the original function a compile wrapper keeps; `_rebinds_at_hand`), and since round 13 put its
    constant into the entry the try writes (`metadata["hash"] = "unknown"`: `placeholder_entry`).
    Since round 14 the fallback may be a name the function already holds (`return matching`: the
    local matches after a failed remote listing; `_value_at_hand`). A log call that only carries
    the traceback (`logger.exception("compile failed")`, `exc_info=True`) without naming the
    exception is no such report: that is the logged fallback ruff exempts and this rule is for.
    Near miss (round 13): a reported fallback that sets a parameter the try converts in place
    (`schema = build_regex(schema)`, then `schema = "(.*?)"`), read by the function after the try,
    is P2 `broad-except.replaces-argument` (`replaced_argument`): the caller's input is replaced and
    the function answers a request the caller did not make, told only in a log;
  - moved, not added (round 12): a try body and handler that stand in the base revision's changed
    files as often, under at least the same `if` conditions (`handler_reach.moved_handlers`): nothing,
    here and for `except RuntimeError`;
  - the error still reaches the caller (round 13, `reviewbot.rules.error_reach`): the handler only
    keeps the caught exception in a name that a later statement of the block raises (`if error is
    not None: raise error`, after a barrier), or the try is a retry of a bounded loop whose handler
    reports the error and whose exhaustion raises or exits with a failing status (`exit(-1)`):
    nothing, here and for `except RuntimeError`;
  - a swallow whose outcome reaches no result (round 12, `reviewbot.rules.handler_reach`): nothing
    substituted that is read, the loss announced (P3 `broad-except.announced-skip`) or only a
    third-party import's side effect (P3 `broad-except.side-effect-import`); or a constant
    substituted in a private function whose result only a report procedure uses (P3
    `broad-except.report-only`). Checked after the reported fallback and the diagnostics and teardown classes, before a comment's P2;
  - a failure that can only cost a warning (round 11): the try stands directly in a function that
    hands back no value, its body only imports and binds local names, and the function after it
    only binds local names, reports and branches on those (`_diagnostic_procedures`: look up two
    versions, warn when they do not match), the handler only passing, logging or returning nothing:
    P3 `broad-except.skips-diagnostics`. Whatever the handler does, the program goes on as it
    would have; a warning is lost, no value is substituted, no state is half changed. Near misses:
    a global set after the try, the computed value returned (P0 `swallows`). Not the wider "the
    try's result is unused and the handler changes nothing": xla's async checkpoint worker
    (`self.save(...)` in the try, the traceback printed) loses the save, the work itself;
  - swallows, logging, in diagnostics or teardown code (a word of the file path or the enclosing
    name is in `_DIAGNOSTIC_WORDS`: dump, report, metrics, trace, close, shutdown, ...) with a body
    of only logging, `pass`, `continue`, `break` and bare `return`/`return None`: P3
    `broad-except.diagnostics`;
  - an *existing route* (round 16, `_existing_route`): the fallback is what the base revision did
    (`reviewbot.rules.previous_behaviour`: a flag whose fallback value selects the base's code, the
    base's code run in the handler, since round 20 a new gate in front of the base's code that a
    failure falls through) or, a call, what the function does outside every handler
    (`reviewbot.rules.own_route`): nothing. The worst case is behaviour the
    code had anyway. Checked after the P3 classes above and before the comment's P2, so a P3 there
    stands. A bare `except:` or `except BaseException:` whose fallback is the base's code
    (`previous_behaviour.base_code_catching_exit`, round 21) is P3
    `broad-except.base-fallback-catches-exit`: the fallback is the old behaviour, what is left is
    the width (Ctrl+C and `sys.exit()` during the new route take the old one too);
  - round 19, what a fallback value does downstream (`reviewbot.rules.data_fallback`), read before
    the exemptions above but the filters, probes, conversions and errors passed on, and before the
    confined try: a catch-all that repeats the fallback of a narrower handler of the same try
    (`except TimeoutError: return False`, then `except Exception as e: print(e); return False`): P2
    `broad-except.widens-fallback`; a handler that binds or returns a container of constants (`tmp =
    [""]`, `[0.0 for _ in batch]`) and is no failure record: P2 `broad-except.constant-data`. A log
    line does not help: the value flows on as data. Nothing (round 24,
    `data_fallback.replaced_marker`) for `None`s that the next statement tests and replaces or turns
    into an error: the next source answers or the function raises, alternatives tried in turn.
    Neither is reported (round 21) when the base's catch-all gave the same fallback over the same
    try in the same function
    (`previous_behaviour.fallback_at_base`): every error took that value before the change, which
    split a narrow case off or changed the report;
  - round 19, severity follows what the handler shows (`reviewbot.rules.other_path`): after the
    existing route, a handler that reports the failure where it happens (`print`, a warning, a log
    call at info level or above, a printed traceback) and on every way through it hands back or
    binds a call computed there (not the try's own call again, nothing of the caught exception) or
    the input at hand (`return model`): P3 `broad-except.reported-other-path` (the second path's
    failure propagates with this one chained; left is the width, and a report that may drop the
    exception). Silent, debug-only, constant or skipped fallbacks stay below;
  - round 20, the try's own `raise` (or `assert False`) lands in the handler on purpose, which
    binds only stand-ins (`reviewbot.rules.own_raise`): P3 `broad-except.raises-into-handler`,
    claiming P0 for the injection experiment (exceptions as control flow; the catch-all also takes
    the try's other failures into that branch);
  - a comment in the handler calling the operation best-effort, the handler substituting nothing
    but a value at hand (`pass`, logging): nothing (round 19; the docstring class's best-effort);
  - round 24, a swallow that is a yes/no probe answering "no" (`predicate_probe`: `is_b70`
    returning `False`), a shown and dropped metrics write (`metrics_write`: TensorBoard's
    `add_scalar`), a logged failure of a procedure named as an attempt (`named_attempt`:
    `_try_bind_numa`) or an optional package's route before the function's other route
    (`optional_route`: `import psutil`, else `/proc/meminfo`): P3 `broad-except.predicate-probe`,
    `metrics-write`, `named-attempt`, `optional-route`; checked after the classes above, before
    the comment's P2;
  - swallows with a comment in the handler saying why that is fine (safe, fallback, best effort,
    expected, optional, "we never want to break user code", ...; "# flag the error" is not a reason): P2 `broad-except.documented`;
  - round 25: a version shim (`reviewbot.rules.version_shim`: the handler binds the imported names
    again to stand-ins at hand) is nothing, or P3 `broad-except.shim-catches-exit` for a bare
    `except:` or `BaseException`, read after the probes; a handler recording the unit's failure as
    its status without the error (`_failure_status`) is P3 `broad-except.failure-status`, after the
    error record; a call of a function of this file that handles its own expected failures
    (`reviewbot.rules.handled_callee`) is P3 `broad-except.handled-callee`, among the classes whose
    outcome reaches no result; a widened fallback nothing in the file reads, the error shown
    (`data_fallback.discarded_return`), is P3 `broad-except.widens-discarded`;
  - swallows otherwise: P0 `broad-except.swallows`, worded `broad-except.decides-route` (round 25,
    `reviewbot.rules.route_decision`) when the handler's silent constant picks the branch of the
    `if` right after the try; otherwise, over a try that guards one operation and holds no
    collective (`_operations`, round 26), `broad-except.swallows-one-operation`, capped at P3 while
    unconfirmed; over a wider try with no route and no collective, when the handler shows the error
    it takes (`_shows_error`, round 29), `broad-except.swallows-reported`, capped at P3 likewise.
- `except RuntimeError` that swallows, with no `torch.OutOfMemoryError` re-raise before it (an
  earlier handler or an `isinstance` check that raises): P0; with the OOM re-raise but a try body
  holding more than one call: P2. Filters and guarded probes (above) are not reported: a filter
  re-raises what its test does not recognise, and a guarded probe's comment names the
  `RuntimeError` it expects from its one call (`xm.xla_device()` without an XLA configuration).
  A narrow handler of a one-call try whose comment names the failure it expects and whose
  alternative calls nothing (`old.data = new.data` when `swap_tensors` "is not permitted") is not
  reported either (`_named_alternative`); one that runs other work (`return eager(fn)`) is.
  Nothing either in a revision none of whose files imports torch or a module named as its binding
  (`lightning.pytorch`, `safetensors.torch`: round 23; `ExceptionIndex.torch_imported`):
  its code cannot raise torch's out-of-memory or compiler errors, and `RuntimeError` is its own
  signal (an overload lookup's "no match"); unless (round 22) the handler itself looks for `CUDA`
  or "out of memory" in the error's text (`error_text.names_device_error`: TorchServe's model
  loader, which loads the user's torch model without importing torch).
  A one-statement try calling `owner.op(args)` whose handler calls `owner.other(args)` with the same
  arguments, binding the result the same way, is P3 `runtime-error-fallback.implementation-alternative`
  (round 12, torchrec's operator fallbacks): an OOM or bad input fails again in the alternative and
  propagates; the nit is to probe the operator outside the call. Its mirror, the same statements
  run again with the CPU as every device they name, unguarded or in a nested try that re-raises, is
  P3 `runtime-error-fallback.cpu-retry` (round 22, `device_retry.cpu_retry`, auto-round's RTN
  fallbacks): an error of the inputs fails again on the CPU and propagates; the nit is the missing
  out-of-memory filter. The same for the try's one `with` statement's one statement run again
  outside the context manager (`with torch.autocast(...): out = model(x)`, then `out = model(x)`):
  P3 `runtime-error-fallback.context-retry` (round 24, `context_retry.retried_outside_context`,
  optimum-intel's autocast retry).
  Not reported either (round 13; since round 16 for the catch-all too, through `_passes_error_on`):
  the handler's one statement is the try's one call again with another name among its string
  arguments (`same_call_other_name`: `Embedding(f"{p}.embedding")` after
  `Embedding(f"{p}.embeddings")`, `version("torchrl-nightly")` after `version("torchrl")`; a device
  or dtype change is no name), whose own failure propagates; and a try whose one call goes to a function of this file that raises `RuntimeError`
  itself and reads nothing the file imports (`_own_runtime_signal`: a lookup's "no match").
  A try whose calls all go to the standard library (`_stdlib_only`: `threading.stack_size`,
  `os.remove`; not `importlib`, `pickle`, `copy`, ... which run the caller's code; since round 27 a
  builtin exception class other than `RuntimeError`'s family built for a `raise` is neutral) is not
  reported either: it cannot raise an OOM, a compiler error or the repository's own subclasses.
- `except RuntimeError` (or a builtin below it, `RUNTIME_FAMILY`) around a call that does not
  re-raise, while the repository defines subclasses of a caught type that are raised in a module
  the try body calls into (one level: a called name's import target, or this file's module for
  local names and `self`), and that the try does not handle first (an earlier handler, the same
  tuple, or a mention in the handler body; handling a class handles its subclasses): P2
  `caught-own-subclass`, naming them. Classes defined in test files count only for handlers in test
  files.
- the width of a try (more than one statement with a call) is no finding of its own: it is an
  annotation (`wide_calls` in the finding's `extra`) of the `broad-except` swallows/documented/
  diagnostics or `runtime-error-fallback.no-oom-reraise` finding on its handler. As a rule of its
  own (`wide-try`, until round 3 of the precision benchmark) it was right on 1 of 6 unseen tries:
  the width matters only where the handler itself is a problem.
"""

from __future__ import annotations

import ast
import bisect
import builtins
import dataclasses
import functools
import re
import sys
from collections.abc import Callable, Container, Iterator, Mapping

from reviewbot import pysource
from reviewbot.exception_index import (
    BUILTIN_EXCEPTIONS,
    CatchSite,
    ExceptionClass,
    caught_names,
    module_name,
    reraises_same,
)
from reviewbot.findings import Finding, Severity
from reviewbot.rules.background_work import dropped_starts, end_on_error_channel, in_dropped_start
from reviewbot.rules.cache_read import cache_miss
from reviewbot.rules.checked_default import checked_default
from reviewbot.rules.collective_try import collective_call
from reviewbot.rules.common import (
    LOUD_LEVELS,
    FileContext,
    bound_by_import,
    callee,
    carries_traceback,
    contains_logging,
    hands_back_nothing,
    imports_any,
    innermost_function,
    is_logging_call,
    last_name,
    reads_name,
    shown_level,
    shows_caught,
    statement_blocks,
    top_level_function,
    warns,
)
from reviewbot.rules.context_retry import retried_outside_context
from reviewbot.rules.created_then_used import used_after_create
from reviewbot.rules.data_fallback import (
    constant_data,
    discarded_return,
    replaced_marker,
    unconverted_element,
    widened_handler,
)
from reviewbot.rules.device_retry import cpu_retry
from reviewbot.rules.dropped_raise import raise_made_conditional
from reviewbot.rules.error_reach import (
    checked_attribute,
    deferred_reraise,
    retry_fails_when_exhausted,
    same_call_other_name,
    unrolled_alternatives,
)
from reviewbot.rules.error_text import names_device_error, silent_filter
from reviewbot.rules.fails_open import fails_open
from reviewbot.rules.fallback_use import (
    callers_skip_value,
    hands_error_to_owner,
    import_for_else_only,
    older_query,
)
from reviewbot.rules.fallthrough import UnboundRead, left_unbound, unbound_reads
from reviewbot.rules.filtered_out import filtered_out
from reviewbot.rules.handled_callee import handled_callee
from reviewbot.rules.handler_reach import (
    enclosing_function,
    handler_key,
    implementation_alternative,
    moved_handlers,
    nothing_substituted,
    placeholder_entry,
    replaced_argument,
    report_only_results,
    runs_no_repository_code,
    substitutes_constant,
)
from reviewbot.rules.import_unbound import import_left_unbound, noop_stub_called
from reviewbot.rules.kept_error import raised_after_loop, raised_by_caller
from reviewbot.rules.metrics_write import metrics_write
from reviewbot.rules.named_attempt import named_attempt
from reviewbot.rules.optional_route import optional_route
from reviewbot.rules.other_path import report_names_caught, reported_other_path
from reviewbot.rules.own_raise import raises_into_handler
from reviewbot.rules.own_route import own_route, reset_to_skipped, retried_without_step
from reviewbot.rules.partial_filter import falls_through_unmatched
from reviewbot.rules.predicate_probe import negative_answer
from reviewbot.rules.previous_behaviour import (
    base_code_catching_exit,
    base_code_in_handler,
    fallback_at_base,
    flag_selects_base,
    gate_before_base,
    unset_key_selects_base,
)
from reviewbot.rules.retry_wrapped import retry_error_skips_handlers
from reviewbot.rules.route_decision import decides_route
from reviewbot.rules.spent_retry import raises_when_spent, repeats_statement
from reviewbot.rules.undo_registration import undoes_own_registration
from reviewbot.rules.unread_result import unread_result
from reviewbot.rules.version_shim import version_shim
from reviewbot.rules.warned_flag import warned_flag_probe

BROAD = {"Exception", "BaseException"}
OOM_NAMES = ("OutOfMemoryError",)
NOQA_CODES = {"BLE001", "BLE", "E722", "S110"}
SHOWN_SUBCLASSES = 6
# builtin types whose repository subclasses usually mean a different failure (a cache miss, an
# unsupported graph); subclasses of `ValueError`, `TypeError`, `KeyError` are by convention bad input
# that a handler of the builtin is meant to catch
RUNTIME_FAMILY = frozenset(name for name, cls in BUILTIN_EXCEPTIONS.items() if issubclass(cls, RuntimeError))

_NOQA = re.compile(r"#\s*(?i:noqa)\b(?:\s*:\s*(?P<codes>[A-Z]+[0-9]*(?:\s*,\s*[A-Z]+[0-9]*)*))?(?P<rest>.*)")
_WORDY = re.compile(r"[^\W\d_]{3,}")
# a handler comment documents a safe-direction fallback when it says why swallowing is fine
_JUSTIFIED = re.compile(
    r"\bsafe|fall(s|ing)?[ -]?back|best[ -]effort|intentional|deliberate|on purpose|expected|optional"
    r"|never (?:\w+ )?(?:to )?(fail|break|block)|(must|should|do|does) ?n[o']?t (?:\w+ to )?(fail|break|block)"
    r"|only (slower|a warning)|harmless|安全|回退|尽力",
    re.IGNORECASE,
)
# exception class names that say "not supported here": the signal callers catch to take another path
_FALLBACK_SIGNAL = re.compile(r"^NotImplemented(Error)?$|Unsupported|NotSupported|Unimplemented")
# words (of the file path and the enclosing qualified name, split at `/`, `.`, `_` and case changes)
# that mark code whose job is diagnostics or teardown
_DIAGNOSTIC_WORDS = frozenset(
    [
        "diagnose",
        "diagnostic",
        "diagnostics",
        "debug",
        "dump",
        "dumps",
        "report",
        "reports",
        "reporting",
        "telemetry",
        "metric",
        "metrics",
        "profile",
        "profiler",
        "profiling",
        "trace",
        "tracing",
        "tracer",
        "stats",
        "statistics",
        "summary",
        "summarize",
        "monitor",
        "monitoring",
        "inspect",
        "log",
        "logs",
        "logging",
        "logger",
        "cleanup",
        "teardown",
        "shutdown",
        "close",
        "del",
        "exit",
        "finalize",
        "stop",
    ]
)
# what a handler records when it marks its unit of work failed (`status = RolloutStatus.ERROR`,
# `return "failed"`)
_FAILURE_WORDS = frozenset(["error", "errored", "failed", "failure", "fail", "aborted", "crashed"])
# a comment next to a one-statement try that says which failure is expected there
_EXPECTED_FAILURE = re.compile(
    r"\b(rais(e|es|ed|ing)|throws?|fail(s|ed|ing)?|unavailable|unsupported|missing"
    r"|not (be )?(available|supported|installed|found|present|configured|permitted|allowed)"
    r"|can ?not|could ?n[o']?t|unable to)\b",
    re.IGNORECASE,
)
# standard-library modules whose functions run code the caller passes or names (imports, pickled
# objects, callbacks, copies of arbitrary objects, workers whose errors they re-raise)
_RUNS_CALLER_CODE = frozenset(
    [
        "importlib",
        "runpy",
        "pickle",
        "copy",
        "copyreg",
        "functools",
        "itertools",
        "operator",
        "concurrent",
        "asyncio",
        "multiprocessing",
        "contextlib",
        "code",
        "codeop",
        "pdb",
        "unittest",
        "shelve",
        "marshal",
        "atexit",
        "weakref",
        "sched",
        "builtins",
    ]
)
# builtin functions that run no code of the caller's choosing beyond dunder conversions
_NEUTRAL_BUILTINS = frozenset(
    [
        "int",
        "float",
        "str",
        "bool",
        "bytes",
        "len",
        "isinstance",
        "issubclass",
        "repr",
        "hex",
        "abs",
        "min",
        "max",
        "round",
        "open",
    ]
)
# builtin exception classes other than `RuntimeError`'s family: building one (`raise AssertionError(...)`)
# runs no code that raises a `RuntimeError`; its arguments are calls of their own (round 27)
_BUILTIN_NON_RUNTIME_ERRORS = frozenset(
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException) and not issubclass(value, RuntimeError)
)
# builtins that run code their caller names or hands them (an attribute's property, a key function,
# a module, an iterator's next step): a try body calling them may run the repository's code
_RUNS_GIVEN_CODE = frozenset(
    ["__import__", "getattr", "setattr", "delattr", "hasattr", "map", "filter", "sorted", "super", "next", "iter"]
)
# builtins that work on the values they are given (`eval` and `exec` on text at hand included)
BUILTINS_AT_HAND = frozenset(name for name in dir(builtins) if not name.startswith("_")) - _RUNS_GIVEN_CODE
# methods a call of the class itself runs (`Cls()`, `with Cls():`)
_CONSTRUCTION = frozenset(["__init__", "__new__", "__post_init__", "__enter__", "__aenter__"])
# methods Python runs when an object is dropped or a `with` block is left
_EXIT_METHODS = frozenset(["__del__", "__exit__", "__aexit__"])
# (module, function) that register a callback run at exit or on a signal -> the callback's argument position
_EXIT_HOOKS = {("atexit", "register"): 0, ("signal", "signal"): 1, ("weakref", "finalize"): 1}
# a docstring that states the function's fallback as its behaviour ("falls back to the original
# function if compilation fails")
# ... or that it swallows errors ("swallows any exception so that ...", "errors are ignored"; not
# "never swallows", "does not ignore errors")
_DOC_FALLBACK = re.compile(
    r"\bfall(s|ing)?[ -]?back|(?<!not )(?<!never )\bswallow(s|ed|ing)?\b|\bbest[ -]effort\b"
    r"|(?<!not )(?<!never )\bignor(e|es|ed|ing) (any |all |every )?(errors?|exceptions?|failures?)"
    r"|(errors?|exceptions?|failures?) (are|is) ignored|回退|吞掉",
    re.IGNORECASE,
)
# a handler comment calling the operation best-effort (round 19; `_DOC_FALLBACK` reads the docstring)
_BEST_EFFORT = re.compile(r"\bbest[ -]effort\b", re.IGNORECASE)
# importlib.metadata lookups of an installed distribution: "not installed" is their expected failure
_PACKAGE_LOOKUPS = frozenset(
    f"importlib.metadata.{name}"
    for name in (
        "version",
        "metadata",
        "distribution",
        "requires",
        "files",
        "distributions",
        "packages_distributions",
        "entry_points",
    )
)
_WORD_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")


def _raises(body: list[ast.stmt]) -> bool:
    """Some statement directly in `body` raises (re-raise or conversion)."""
    return any(isinstance(stmt, ast.Raise) for stmt in body)


def _conversion(handler: ast.ExceptHandler) -> str | None:
    """The type a handler converts the caught exception into (`raise X(...) [from e]` directly in
    its body), None when it re-raises the same exception or raises nothing unconditionally."""
    if reraises_same(handler):
        return None
    for stmt in handler.body:
        if isinstance(stmt, ast.Raise) and stmt.exc is not None:
            target = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
            return ast.unparse(target)
    return None


def _rebuilds(handler: ast.ExceptHandler) -> bool:
    """A statement directly in the handler raises a new instance of the caught exception's own class
    (`raise type(e)(msg)`, `raise e.__class__(msg).with_traceback(None) from None`): the rebuilt error
    keeps only what is passed again (the original's other arguments are lost, a class whose
    constructor takes other arguments fails with a `TypeError` there), and `from None` drops the
    cause."""
    name = handler.name
    if name is None:
        return False
    for stmt in handler.body:
        exc = stmt.exc if isinstance(stmt, ast.Raise) else None
        while isinstance(exc, ast.Call) and isinstance(exc.func, ast.Attribute) and exc.func.attr == "with_traceback":
            exc = exc.func.value
        if not isinstance(exc, ast.Call):
            continue
        cls = exc.func
        if (
            isinstance(cls, ast.Call)
            and isinstance(cls.func, ast.Name)
            and cls.func.id == "type"
            and len(cls.args) == 1
            and isinstance(cls.args[0], ast.Name)
            and cls.args[0].id == name
        ):
            return True
        if (
            isinstance(cls, ast.Attribute)
            and cls.attr == "__class__"
            and isinstance(cls.value, ast.Name)
            and cls.value.id == name
        ):
            return True
    return False


def _mentions_oom(node: ast.AST) -> bool:
    return any(
        (isinstance(sub, ast.Attribute) and sub.attr.endswith(OOM_NAMES))
        or (isinstance(sub, ast.Name) and sub.id.endswith(OOM_NAMES))
        for sub in pysource.walk(node)
    )


def _oom_reraised(node: ast.Try | ast.TryStar, index: int) -> bool:
    for earlier in node.handlers[:index]:
        names = caught_names(earlier) or []
        if any(n.endswith(OOM_NAMES) for n in names) and _raises(earlier.body):
            return True
    handler = node.handlers[index]
    for sub in pysource.walk(handler):
        if isinstance(sub, ast.If) and _mentions_oom(sub.test) and _raises(sub.body):
            return True
    return False


def _stdlib_only(body: list[ast.stmt], imports: dict[str, str]) -> bool:
    """Every call in `body` goes to the standard library through a name this file imports from it
    (`threading.stack_size(...)`, `os.remove(...)`, `from shutil import rmtree`), other than the
    modules in `_RUNS_CALLER_CODE`; builtin functions (`int`, `len`) are neutral; there is at least
    one such call. Such a body cannot raise `torch.OutOfMemoryError`, a compiler error or the
    repository's own `RuntimeError` subclasses: a `RuntimeError` from it is the library's own. Since
    round 27 a builtin exception class that is no `RuntimeError` is neutral too (`raise
    AssertionError(...)` after `asyncio.get_running_loop()`: the check's own error, which the handler
    does not catch)."""
    return bool(stdlib_call_count(body, imports, _NEUTRAL_BUILTINS | _BUILTIN_NON_RUNTIME_ERRORS))


def stdlib_call_count(
    body: list[ast.stmt], imports: Mapping[str, str], neutral: frozenset[str] = _NEUTRAL_BUILTINS
) -> int | None:
    """How many calls in `body` go to the standard library through a name this file imports from it;
    None when any call goes elsewhere: the repository, a third-party library, a local function, a
    variable's method, a call's result, or a builtin not in `neutral` (calls of the builtins in
    `neutral` are not counted), and when `body` imports a module outside the standard library or
    awaits (a module's or a coroutine's code runs). A module in `_RUNS_CALLER_CODE` counts only when called without
    arguments (`asyncio.get_running_loop()`: nothing of the caller's is handed to it). A method of a
    value such a call returned in `body` (`with open(path) as f: f.read(4)`, `m = re.match(...);
    m.group(1)`) is a call of that library too. `imports`: `import_map`."""
    library_values = _library_values(body, imports, neutral)
    found = 0
    for stmt in body:
        for call in pysource.walk(stmt):
            if isinstance(call, (ast.Await, ast.YieldFrom)) or (
                isinstance(call, (ast.Import, ast.ImportFrom)) and not _stdlib_import(call)
            ):
                return None  # a coroutine's or a module's code runs
            if not isinstance(call, ast.Call):
                continue
            kind = _library_call(call, imports, neutral, library_values)
            if kind is None:
                return None
            found += kind
    return found


def _stdlib_import(stmt: ast.Import | ast.ImportFrom) -> bool:
    """An absolute import of standard-library modules only."""
    if isinstance(stmt, ast.ImportFrom):
        return not stmt.level and (stmt.module or "").split(".")[0] in sys.stdlib_module_names
    return all(alias.name.split(".")[0] in sys.stdlib_module_names for alias in stmt.names)


def _library_call(
    call: ast.Call, imports: Mapping[str, str], neutral: frozenset[str], library_values: frozenset[str]
) -> int | None:
    """1 for a call into the standard library (see `stdlib_call_count`), 0 for a builtin of
    `neutral`, None for any other call."""
    func = call.func
    while isinstance(func, ast.Attribute):
        func = func.value
    if not isinstance(func, ast.Name):
        return None  # `f()()`, `x[0]()`, a call on a call's result
    if func.id in library_values and func is not call.func:
        return 1  # a method of a value the standard library returned
    target = imports.get(func.id)
    if target is None:
        return 0 if func.id in neutral else None  # a local function, a variable's method, an exec
    top = target.split(".")[0]
    if top not in sys.stdlib_module_names:
        return None
    if top in _RUNS_CALLER_CODE and (call.args or call.keywords):
        return None
    return 1


def _library_values(body: list[ast.stmt], imports: Mapping[str, str], neutral: frozenset[str]) -> frozenset[str]:
    """Names `body` binds to the result of a builtin of `neutral` or a standard-library call
    (`with open(path) as f`, `m = re.match(...)`): values of the library, whose methods run its code.
    Since round 11 also the results of such values' methods, to a fixed point (`line = f.readline()`
    then `line.split()`: the text a file object returned is the library's value too)."""
    pairs: list[tuple[ast.expr, ast.expr | None]] = []
    for stmt in body:
        for node in pysource.walk(stmt):
            if isinstance(node, (ast.With, ast.AsyncWith)):
                pairs.extend((item.context_expr, item.optional_vars) for item in node.items)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                pairs.append((node.value, node.targets[0]))
    bound: set[str] = set()
    grown = True
    while grown:
        grown = False
        for value, target in pairs:
            if (
                isinstance(target, ast.Name)
                and target.id not in bound
                and isinstance(value, ast.Call)
                and _library_call(value, imports, neutral, frozenset(bound)) is not None
            ):
                bound.add(target.id)
                grown = True
    return frozenset(bound)


def _object_lookup(body: list[ast.stmt], imports: Mapping[str, str]) -> str | None:
    """The first attribute a try body without calls reads from a name that is no imported module
    (`quant_injector.update_state_dict_impl`, round 25), as written; None when there is none or the
    body calls anything. Such a read may run the object's own code (a property, `__getattr__`, an
    injector resolving a dependency): the confined try's "only builtins and the standard library
    run" is then not so, and `broad-except.lookup-catches-exit` says what runs instead."""
    if any(isinstance(sub, ast.Call) for stmt in body for sub in pysource.walk(stmt)):
        return None
    for stmt in body:
        for sub in pysource.walk(stmt):
            if (
                isinstance(sub, ast.Attribute)
                and isinstance(sub.ctx, ast.Load)
                and isinstance(sub.value, ast.Name)
                and sub.value.id not in imports
            ):
                return ast.unparse(sub)
    return None


def _call_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    return [stmt for stmt in body if any(isinstance(sub, ast.Call) for sub in pysource.walk(stmt))]


def _comment(line: str) -> str | None:
    """The comment text of a source line, None without one. A `#` inside a string literal that
    opens and closes on the line (`logger.exception("job %d (%s#%d)", ...)`) is no comment; a line
    inside a multi-line string is read as code."""
    quote = ""
    index = 0
    while index < len(line):
        char = line[index]
        if quote:
            if char == "\\":
                index += 2
                continue
            if line.startswith(quote, index):
                index += len(quote)
                quote = ""
                continue
        elif char in "'\"":
            quote = char * 3 if line.startswith(char * 3, index) else char
            index += len(quote)
            continue
        elif char == "#":
            return line[index + 1 :].strip()
        index += 1
    return None


def _clean_reason(text: str) -> str:
    return text.strip().strip("-–—:;,.()[]#").strip()


def _noqa(ctx: FileContext, handler: ast.ExceptHandler) -> tuple[str, str] | None:
    """(codes, reason) of a `# noqa` for a catch-all on the `except` line (reason possibly empty);
    None without one or when it names only unrelated codes. The reason is the text after the codes,
    else the comment lines directly above the `except`."""
    line = ctx.lines[handler.lineno - 1] if handler.lineno <= len(ctx.lines) else ""
    comment = _comment(line)
    match = _NOQA.search("#" + comment) if comment is not None else None
    if match is None:
        return None
    codes = [c.strip().upper() for c in (match.group("codes") or "").split(",") if c.strip()]
    if codes and not NOQA_CODES & set(codes):
        return None
    reason = _clean_reason(match.group("rest"))
    if not _WORDY.search(reason):
        above: list[str] = []
        index = handler.lineno - 2
        while index >= 0 and ctx.lines[index].strip().startswith("#"):
            above.insert(0, ctx.lines[index].strip().lstrip("#").strip())
            index -= 1
        reason = _clean_reason(" ".join(above))
    return (", ".join(codes) or "all", reason if _WORDY.search(reason) else "")


def _noqa_reason(ctx: FileContext, handler: ast.ExceptHandler) -> str:
    """The reason of the handler's catch-all `# noqa` ("" without one or without a reason)."""
    noqa = _noqa(ctx, handler)
    return noqa[1] if noqa is not None else ""


def _handler_comment(ctx: FileContext, handler: ast.ExceptHandler) -> str:
    """The comments inside the handler's lines (the `except` line's own, noqa excluded) when they say
    why swallowing is fine (`_JUSTIFIED`: safe, fallback, best effort, expected, ...), else ""."""
    end = handler.end_lineno or handler.lineno
    texts = []
    for number in range(handler.lineno, end + 1):
        text = _comment(ctx.lines[number - 1]) if number <= len(ctx.lines) else None
        if text and not _NOQA.search("#" + text):
            texts.append(text)
    reason = _clean_reason(" ".join(texts))
    return reason if _JUSTIFIED.search(reason) else ""


def _logs_or_leaves(stmt: ast.stmt) -> bool:
    """A logging call, `pass`, `continue`, `break` or `return`/`return None`."""
    if isinstance(stmt, ast.Expr) and is_logging_call(stmt.value):
        return True
    if isinstance(stmt, (ast.Pass, ast.Continue, ast.Break)):
        return True
    return isinstance(stmt, ast.Return) and (
        stmt.value is None or (isinstance(stmt.value, ast.Constant) and stmt.value.value is None)
    )


def _logs_and_continues(handler: ast.ExceptHandler) -> bool:
    """Only logging calls, `pass`, `continue`, `break` and `return`/`return None`, with at least one log."""
    return all(_logs_or_leaves(stmt) for stmt in handler.body) and contains_logging(handler.body)


def _reports_error(handler: ast.ExceptHandler) -> bool:
    """A log call in the handler carries the traceback (`.exception(...)`, `exc_info=` not False or
    None) or, at warning level or above, the caught exception itself."""
    for sub in pysource.walk(handler):
        if not is_logging_call(sub):
            continue
        assert isinstance(sub, ast.Call)
        if carries_traceback(sub):
            return True
        method = sub.func.attr if isinstance(sub.func, ast.Attribute) else ""
        if method in LOUD_LEVELS and handler.name is not None:
            named = (node for arg in sub.args for node in pysource.walk(arg))
            if any(isinstance(node, ast.Name) and node.id == handler.name for node in named):
                return True
    return False


def _failure_marker(node: ast.expr | None) -> bool:
    """`RolloutStatus.ERROR`, `FAILED`, `"failed"`: a value that says the unit failed."""
    if isinstance(node, ast.Attribute):
        word = node.attr
    elif isinstance(node, ast.Name):
        word = node.id
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
        word = node.value
    else:
        return False
    return word.lower() in _FAILURE_WORDS


def _exits_with_error(handler: ast.ExceptHandler) -> bool:
    """A statement directly in the handler's body ends the process with the caught exception as its
    message (round 21): `sys.exit(f"{e}")`, `sys.exit(str(e))`, `exit(e)`. `SystemExit` with a code
    that is not an integer prints it on stderr and exits with status 1, so the error is reported
    where the process ends. Near misses: an integer status (`sys.exit(e.errno)` shows nothing), the
    exit under an `if`, `os._exit` (it takes a status only)."""
    if handler.name is None:
        return False
    for stmt in handler.body:
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
            continue
        call = stmt.value
        if ast.unparse(call.func) not in ("sys.exit", "exit", "quit") or len(call.args) != 1 or call.keywords:
            continue
        if _text_of_error(call.args[0], handler.name):
            return True
    return False


def _text_of_error(node: ast.expr, name: str) -> bool:
    """`node` is the exception `name` itself or text built from it: an f-string, `str(...)`/`repr(...)`,
    `"...".format(...)`, `"..." % ...` or `"..." + ...` that reads it."""
    if isinstance(node, ast.Name):
        return node.id == name
    reads = reads_name(node, name)
    if isinstance(node, ast.JoinedStr):
        return reads
    if isinstance(node, ast.Call):
        func = node.func
        textual = (isinstance(func, ast.Name) and func.id in ("str", "repr")) or (
            isinstance(func, ast.Attribute)
            and func.attr == "format"
            and isinstance(func.value, ast.Constant)
            and isinstance(func.value.value, str)
        )
        return textual and reads
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mod, ast.Add)):
        left = node.left
        return reads and (
            isinstance(left, ast.JoinedStr) or (isinstance(left, ast.Constant) and isinstance(left.value, str))
        )
    return False


def _ends_process_failed(stmt: ast.stmt) -> bool:
    """`sys.exit(status)`, `os._exit(status)`, `exit(status)` with a status other than `0`/`None`:
    the process ends, and whoever started it sees the failure in its exit status."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    call = stmt.value
    func = call.func
    dotted = ast.unparse(func)
    if dotted not in ("sys.exit", "os._exit", "exit", "quit", "_exit"):
        return False
    if not call.args:
        return dotted in ("os._exit", "_exit")  # os._exit needs its status; a bare sys.exit() is status 0
    status = call.args[0]
    return not (isinstance(status, ast.Constant) and status.value in (0, None, False))


def _records_failure(stmt: ast.stmt) -> bool:
    """The handler records that its unit failed: an assignment or return of a failure marker
    (`status = Status.ERROR`, `return "failed"`), a call named for a failure, alone, assigned or
    returned (`metrics.increase_failed_requests(...)`, `outcome = failure(exc)`,
    `return self._job_failed(job, exc)`), a returned or yielded response
    that carries a failure marker as a keyword (`yield Response(..., finish_reason="error")`), a
    returned response carrying an HTTP error status (`_error_status`, positional or keyword), or the
    end of the process with a failing status (`_ends_process_failed`), and (round 27) a returned tuple
    of values at hand whose one boolean is `False` (`return (hostname, False)`: the unit's result
    with its success flag down, as a pool's collector reads it)."""
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.Return)) and _failure_marker(stmt.value):
        return True
    if isinstance(stmt, ast.Return) and _flag_down(stmt.value):
        return True
    if _ends_process_failed(stmt):
        return True
    value = stmt.value if isinstance(stmt, (ast.Expr, ast.Return, ast.Assign, ast.AnnAssign)) else None
    if isinstance(value, (ast.Yield, ast.Await)):
        value = value.value
    if not isinstance(value, ast.Call):
        return False
    if value is stmt.value:
        words = {word.lower() for word in _WORD_SPLIT.split(callee(value)) if word}
        if words & _FAILURE_WORDS:
            return True
    if isinstance(stmt, ast.Return) and any(_error_status(arg) for arg in value.args):
        return True
    return any(
        _failure_marker(keyword.value) or _error_status(keyword.value) for keyword in value.keywords if keyword.arg
    )


def _flag_down(node: ast.expr | None) -> bool:
    """A tuple of names and constants whose only boolean is `False` (round 27: `(hostname, False)`)."""
    if not isinstance(node, ast.Tuple) or len(node.elts) < 2:
        return False
    if not all(isinstance(item, (ast.Name, ast.Constant)) for item in node.elts):
        return False
    flags = [item.value for item in node.elts if isinstance(item, ast.Constant) and isinstance(item.value, bool)]
    return flags == [False]


def _error_status(node: ast.expr) -> bool:
    """An HTTP error status, 400 to 599, as an integer constant (round 16: `return
    create_predict_response(None, ids, "Prediction failed", 503)`, `JSONResponse(..., status_code=500)`):
    a response that says the request failed."""
    return isinstance(node, ast.Constant) and type(node.value) is int and 400 <= node.value <= 599


# a queue's `put` is `_queues_error`'s: there only the exception object itself hands the failure on
_COLLECTING = frozenset(["append", "add", "extend"])


def _keeps_error(stmt: ast.stmt, name: str | None) -> bool:
    """`stmt` adds a value built from the caught exception `name` to a collection
    (`results.append({"case": c, "error": repr(e)})`, `failures[key] = str(e)`)."""
    if name is None:
        return False
    values: list[ast.expr] = []
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        func = stmt.value.func
        if isinstance(func, ast.Attribute) and func.attr in _COLLECTING:
            values = [*stmt.value.args, *(keyword.value for keyword in stmt.value.keywords)]
    elif isinstance(stmt, ast.Assign) and all(isinstance(target, ast.Subscript) for target in stmt.targets):
        values = [stmt.value]
    return any(isinstance(sub, ast.Name) and sub.id == name for value in values for sub in pysource.walk(value))


def _unit_boundary(handler: ast.ExceptHandler, in_loop: bool, teardown: bool, ends_turn_in_if: bool) -> bool:
    """The handler ends one unit of work and reports its error, in a log or, for a turn of a loop,
    in the loop's results (see the module docstring). `in_loop`: the try stands directly in a loop's
    body; `ends_turn_in_if` (round 27): it ends the loop's turn from inside `if` blocks
    (`_turn_ending_tries`), which counts for an error kept in the loop's results only (BMTrain's
    `error_msgs.append(...)`); a logged handler there keeps its finding (cachetools' evict callback)."""
    kept = {id(stmt) for stmt in handler.body if _keeps_error(stmt, handler.name)}
    logged = _reports_error(handler) or _exits_with_error(handler)
    if not logged and not kept:
        return False
    records_failure = False
    for stmt in _branches_flattened(handler.body):
        if _logs_or_leaves(stmt) or id(stmt) in kept:
            continue
        if _records_failure(stmt) or _closes_own_unit(stmt):
            records_failure = True
            continue
        return False
    ends_turn = in_loop or (bool(handler.body) and isinstance(handler.body[-1], ast.Continue))
    if not logged:  # the error is kept in the results: only a loop's results hold one per turn
        return ends_turn or ends_turn_in_if
    return ends_turn or teardown or records_failure


# what an object's own method calls to end it (round 20: a server's connection closed on a bad message)
_ENDS_OBJECT = frozenset(["close", "shutdown", "stop", "terminate", "abort", "disconnect"])


def _closes_own_unit(stmt: ast.stmt) -> bool:
    """`self.close()` (or another method of `_ENDS_OBJECT`, without arguments): the handler ends the
    object its method runs in, a connection or a session, so the failed unit of work is that object
    and it is over (TVM's tracker closes the peer's connection on a bad message and serves the
    others). Near miss: a handler that closes something else and goes on."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    call = stmt.value
    func = call.func
    return (
        not call.args
        and not call.keywords
        and isinstance(func, ast.Attribute)
        and func.attr in _ENDS_OBJECT
        and isinstance(func.value, ast.Name)
        and func.value.id == "self"
    )


def _branches_flattened(body: list[ast.stmt]) -> list[ast.stmt]:
    """`body` with each `if` replaced by the statements of both its branches, at any depth (round 16:
    a request handler that answers "out of resources" for one kind of error and "failed" for the
    others ends its unit either way). The test is not read; a call in it is no statement here."""
    flat: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, ast.If):
            flat.extend(_branches_flattened([*stmt.body, *stmt.orelse]))
        else:
            flat.append(stmt)
    return flat


def _filters(handler: ast.ExceptHandler) -> bool:
    """The handler re-raises the caught exception unless a test that inspects it holds: an `if`
    directly in its body whose test names the caught exception and that re-raises it unchanged
    when the test fails (`if should_retry(e): ... else: raise`, `if not is_oom(e): raise`). The
    reverse, re-raising what the test recognises (`if isinstance(e, OutOfMemoryError): raise`),
    keeps everything else and is no filter. An `assert` directly in its body whose test names the
    caught exception (`assert "Missing key(s)" in str(e)`, a test's expected failure) is one too:
    what the test rejects fails there, chained to the caught error (unless Python runs with `-O`)."""
    if handler.name is None:
        return False
    for stmt in handler.body:
        if isinstance(stmt, ast.Assert) and any(
            isinstance(sub, ast.Name) and sub.id == handler.name for sub in pysource.walk(stmt.test)
        ):
            return True
        if not isinstance(stmt, ast.If):
            continue
        inspects = any(isinstance(sub, ast.Name) and sub.id == handler.name for sub in pysource.walk(stmt.test))
        if not inspects:
            continue
        negated = isinstance(stmt.test, ast.UnaryOp) and isinstance(stmt.test.op, ast.Not)
        # re-raising when the test fails: only what the test recognises is kept
        branch = stmt.body if negated else stmt.orelse
        if branch and reraises_same(ast.ExceptHandler(type=handler.type, name=handler.name, body=branch)):
            return True
    return False


def _bounded_retry(handler: ast.ExceptHandler, in_loop: bool) -> bool:
    """A retry: the try stands directly in a loop's body and its handler re-raises the caught
    exception, unchanged, under an `if` that does not inspect it (the attempts are used up: `if i ==
    retries: raise e`), and otherwise neither returns nor breaks out of the loop (it logs, sleeps,
    continues): every error, an `AssertionError` included, reaches the caller after the last
    attempt. A handler that returns or breaks on some path, or never re-raises, substitutes a
    result and stays reported."""
    if not in_loop:
        return False
    if any(isinstance(sub, (ast.Return, ast.Break)) for stmt in handler.body for sub in pysource.walk(stmt)):
        return False
    for stmt in handler.body:
        if not isinstance(stmt, ast.If) or stmt.orelse:
            continue
        if handler.name is not None and any(
            isinstance(sub, ast.Name) and sub.id == handler.name for sub in pysource.walk(stmt.test)
        ):
            continue
        if reraises_same(ast.ExceptHandler(type=handler.type, name=handler.name, body=stmt.body)):
            return True
    return False


def _reports_caught(stmt: ast.stmt, name: str | None, helpers: bool = False) -> bool:
    """A `print`, `warnings.warn` or a log call at warning level or above whose arguments name the
    caught exception: the failure and its cause are visible where it happens. `helpers` (round 24):
    a helper of those named for one process or one showing (`logger.warning_rank0`, `print_rank_0`:
    `common.shown_level`) is one too."""
    if name is None or not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    call = stmt.value
    method = shown_level(call) if helpers else callee(call) if is_logging_call(call) else None
    if method not in LOUD_LEVELS and method not in ("print", "warn"):
        return False
    args = [*call.args, *(k.value for k in call.keywords)]
    return any(_names_exception(arg, name) for arg in args)


def _names_exception(expr: ast.AST, name: str) -> bool:
    """`expr` uses the caught exception `name` other than for its class alone: `type(e)`,
    `type(e).__name__` and `e.__class__` say which type failed, not why (the message and the cause
    are dropped)."""
    if isinstance(expr, ast.Name):
        return expr.id == name
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Name)
        and expr.func.id == "type"
        and len(expr.args) == 1
        and isinstance(expr.args[0], ast.Name)
    ):
        return False
    if isinstance(expr, ast.Attribute) and expr.attr == "__class__" and isinstance(expr.value, ast.Name):
        return False
    return any(_names_exception(child, name) for child in ast.iter_child_nodes(expr))


def _reported_fallback(handler: ast.ExceptHandler, try_body: list[ast.stmt], after: ast.stmt | None) -> bool:
    """The handler reports the caught exception (`_reports_caught`) and otherwise only falls back to
    a constant or a value the function already holds (`pass`, `return <constant or name>`, `<name> =
    <constant or name>`, `_value_at_hand`; pytorch/helion's `return matching`, the local matches
    after a failed remote listing) or falls through to the code
    after the try (the function's own other route to its result, such as a slower conversion). The
    failure is visible with its cause where it happens, and the fallback is a stated default or the
    code path the function takes anyway, not a substitute computed in the handler. A handler that
    falls off the end of a function whose try returns a result is not one (an implicit `None`
    replaces the result; `after`: the statement after the try, see `_following`). Since round 24 a
    handler that only reports (nothing bound, nothing handed back: the code after the try goes on)
    may report through a helper named for one process or one showing (`logger.warning_rank0`,
    `print_rank_0`); one that also hands back a constant may not (megatron's ModelOpt-state probe,
    `print_rank_0(...)` then `return False` for "no state", is a true `P2` of the corpus)."""
    body = _rank_guards_opened(handler.body)
    if not isinstance(handler.body[-1], ast.Return) and isinstance(try_body[-1], ast.Return) and after is None:
        return False
    if all(_reports_caught(stmt, handler.name, helpers=True) for stmt in body):
        return True  # only reports, through a one-process or one-time helper too (round 24)
    if not any(_reports_caught(stmt, handler.name) for stmt in body):
        return False
    return all(
        _reports_caught(stmt, handler.name)
        or _value_at_hand(stmt)
        or _prepares_report(body, i)
        or _rebinds_at_hand(stmt)
        or placeholder_entry(stmt, try_body)
        for i, stmt in enumerate(body)
    )


def _rebinds_at_hand(stmt: ast.stmt) -> bool:
    """An assignment of a value already at hand, read without a call (a name, a constant, an
    attribute of a name: `self._compiled = self._func`), to plain names or attributes of a name
    (round 12, nncf's compile wrapper falling back to the original function it keeps): the function's
    own other route, not a substitute computed in the handler."""
    if not isinstance(stmt, ast.Assign):
        return False
    targets_plain = all(
        isinstance(t, ast.Name) or (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name))
        for t in stmt.targets
    )
    value = stmt.value
    at_hand = isinstance(value, (ast.Name, ast.Constant)) or (
        isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name)
    )
    return targets_plain and at_hand


def _prepares_report(body: list[ast.stmt], index: int) -> bool:
    """`body[index]` only prepares the handler's report (round 11): an assignment to plain names that
    a later logging call of `body` reads, in a handler that ends with
    `return` (`arch = core.arch_name(arch)` before `core.warn(f"{e} ... {arch}")`, then `return
    False`): the names cannot reach the code after the handler, so no value is substituted."""
    stmt = body[index]
    if not (isinstance(stmt, ast.Assign) and isinstance(body[-1], ast.Return)):
        return False
    if not all(isinstance(target, ast.Name) for target in stmt.targets):
        return False
    names = {target.id for target in stmt.targets if isinstance(target, ast.Name)}
    read = {
        node.id
        for later in body[index + 1 :]
        if isinstance(later, ast.Expr) and is_logging_call(later.value)
        for node in pysource.walk(later)
        if isinstance(node, ast.Name)
    }
    return names <= read


def _diagnostic_procedures(tree: ast.AST) -> dict[int, str]:
    """The tries whose failure can only cost a diagnostic (round 11), by id, with their function's
    name: a try standing directly in the body of a function that hands back no value (no `return`
    of a value, no `yield`), whose body only imports and binds local names (it computes, it changes
    nothing; a name the function declares `global` or `nonlocal` is not local), and whose function
    after it only binds local names, reports (`warnings.warn`, logging, `print`) and branches on
    those, with at least one report (`_warn_iree_is_too_old`: look up two versions, warn when they
    do not match; a once-only flag set before the try is no part of it). Whatever the
    handler does short of raising, the program goes on exactly as it would have: a warning is lost,
    no value is substituted and no state is left half changed."""
    found: dict[int, str] = {}
    for function in pysource.nodes(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if not hands_back_nothing(function):
            continue
        shared = pysource.shared_names(function)
        for index, stmt in enumerate(function.body):
            if not isinstance(stmt, ast.Try) or stmt.orelse or stmt.finalbody:
                continue
            rest = function.body[index + 1 :]
            if (
                all(_binds_only(part, shared) for part in stmt.body)
                and all(_diagnostic_statement(part, shared) for part in rest)
                and contains_logging(rest)
            ):
                found[id(stmt)] = function.name
    return found


def _binds_only(stmt: ast.stmt, shared: set[str]) -> bool:
    """An import, or an assignment whose targets are plain names, none of them in `shared` (the
    function's `global` and `nonlocal` names)."""
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        names = [(alias.asname or alias.name).split(".")[0] for alias in stmt.names]
    elif isinstance(stmt, ast.Assign):
        names = [target.id if isinstance(target, ast.Name) else "" for target in stmt.targets]
    elif isinstance(stmt, ast.AnnAssign):
        names = [stmt.target.id if isinstance(stmt.target, ast.Name) else ""]
    else:
        return False
    return all(name and name not in shared for name in names)


def _diagnostic_statement(stmt: ast.stmt, shared: set[str]) -> bool:
    """A statement that binds local names (`_binds_only`), reports (a logging call), passes or
    returns nothing, or an `if` of such statements."""
    if _binds_only(stmt, shared) or _logs_or_leaves(stmt):
        return True
    if isinstance(stmt, ast.Expr) and warns(stmt):
        return True
    if isinstance(stmt, ast.If):
        return all(_diagnostic_statement(part, shared) for part in [*stmt.body, *stmt.orelse])
    return False


def _rank_guards_opened(body: list[ast.stmt]) -> list[ast.stmt]:
    """`body` with each rank guard replaced by its body: an `if` without `else` whose test reads the
    process's rank (a name or attribute with the word `rank`, `is_main_process`, ...) and whose
    body only logs (`if not dist.is_initialized() or dist.get_rank() == 0: print(ex)`). One process
    of many reports the error, as every process would without the guard (round 10); another test
    (`if verbose: print(ex)`) leaves the report to chance and stays a statement of its own."""
    out: list[ast.stmt] = []
    for stmt in body:
        if (
            isinstance(stmt, ast.If)
            and not stmt.orelse
            and _reads_rank(stmt.test)
            and all(isinstance(sub, ast.Expr) and is_logging_call(sub.value) for sub in stmt.body)
        ):
            out.extend(stmt.body)
        else:
            out.append(stmt)
    return out


def _reads_rank(test: ast.expr) -> bool:
    words = set()
    for node in pysource.walk(test):
        text = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
        words.update(word.lower() for word in _WORD_SPLIT.split(text) if word)
    return bool(words & {"rank", "master", "main"})


_DISPLAY_METHODS = frozenset({"__repr__", "__str__", "__format__", "_repr_html_", "_repr_pretty_"})


def _display_functions(tree: ast.Module) -> frozenset[str]:
    """Names of the functions of `tree` that only build text for display: the display methods
    (`__repr__`, `__str__`, ...) and every function of the file that is called (by name or as
    `self.<name>`) at least once and only from display functions, followed to a fixed point.
    A call from code outside any function counts as a caller that is not one."""
    callers: dict[str, set[str]] = {}
    defined: set[str] = set()

    # each node with the innermost function it stands in ("<module>" outside any)
    pending: list[tuple[ast.AST, str]] = [(tree, "<module>")]
    while pending:
        node, within = pending.pop()
        for child in pysource.children(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                defined.add(child.name)
                pending.append((child, child.name))
                continue
            if isinstance(child, ast.Call):
                func = child.func
                if isinstance(func, ast.Name):
                    callers.setdefault(func.id, set()).add(within)
                elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
                    callers.setdefault(func.attr, set()).add(within)
            pending.append((child, within))
    display = set(_DISPLAY_METHODS)
    grown = True
    while grown:
        grown = False
        for name in defined - display:
            if callers.get(name) and callers[name] <= display:
                display.add(name)
                grown = True
    return frozenset(display)


def _error_wording_functions(tree: ast.Module) -> frozenset[str]:
    """Names of the functions of `tree` whose answer can only word an error that is raised anyway
    (round 11): called (by name or as `self.<name>`) at least once and only from an *error path*,
    or from such functions, followed to a fixed point. A call is on an error path when it stands in
    a statement of a function's body from which that body holds no `return` and ends in `raise`:
    every way on from the call raises (taichi's `check_ggui_availability` asks `try_get_wheel_tag`
    which message to raise). A call from code outside any function is on no error path."""
    uses: dict[str, list[tuple[str, bool]]] = {}
    defined: set[str] = set()

    def record(node: ast.AST, within: str, on_error_path: bool) -> None:
        for sub in _own_scope(node):
            if sub is not node and isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit_function(sub)
            elif isinstance(sub, ast.Call):
                func = sub.func
                if isinstance(func, ast.Name):
                    uses.setdefault(func.id, []).append((within, on_error_path))
                elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
                    uses.setdefault(func.attr, []).append((within, on_error_path))

    def visit_function(function: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        defined.add(function.name)
        tail = len(function.body)
        if isinstance(function.body[-1], ast.Raise):
            tail = 0
            for index, stmt in enumerate(function.body):
                if any(isinstance(sub, ast.Return) for sub in _own_scope(stmt)):
                    tail = index + 1
        for index, stmt in enumerate(function.body):
            record(stmt, function.name, index >= tail)

    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            visit_function(stmt)
        else:
            record(stmt, "<module>", False)
    wording: set[str] = set()
    grown = True
    while grown:
        grown = False
        for name in defined - wording:
            calls = uses.get(name, [])
            if calls and all(on_error_path or within in wording for within, on_error_path in calls):
                wording.add(name)
                grown = True
    return frozenset(wording)


def _own_scope(node: ast.AST) -> Iterator[ast.AST]:
    """`node` and the nodes under it, without the bodies of the functions and lambdas defined
    there (a nested function definition itself is included), yielded as they are walked (no list
    of a whole scope is built)."""
    pending = [node]
    while pending:
        current = pending.pop()
        yield current
        if current is not node and isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        pending.extend(pysource.children(current))


def _display_placeholder(ctx: FileContext, handler: ast.ExceptHandler, display: Container[str]) -> bool:
    """A handler in display-only code (`display`: `_display_functions` and
    `_error_wording_functions` of the file, `_DisplayOnly`) that only returns a constant
    placeholder (`return "{...}"`): a `repr` must not raise, and what it drops is text."""
    if not handler.body or not all(
        isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Constant) for stmt in handler.body
    ):
        return False
    return ctx.qualname(handler.lineno).rsplit(".", 1)[-1] in display


class _DisplayOnly:
    """`name in _display_functions(tree) | _error_wording_functions(tree)`, both read once on the
    first name they can hold: besides the display methods, only functions the file calls
    (`name(...)`, `self.name(...)`) at least once, so a name no call names is answered from the
    file's called names alone."""

    def __init__(self, tree: ast.Module) -> None:
        self._tree = tree

    @functools.cached_property
    def _called(self) -> frozenset[str]:
        names: set[str] = set()
        for node in pysource.nodes(self._tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Name):
                names.add(func.id)
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
                names.add(func.attr)
        return frozenset(names)

    @functools.cached_property
    def _functions(self) -> frozenset[str]:
        # the call graphs grow only from a display method the file defines and from a function
        # whose body ends in `raise` (an error path): a file without either has nothing to add
        functions = [n for n in pysource.nodes(self._tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        found = frozenset(_DISPLAY_METHODS)
        if any(function.name in _DISPLAY_METHODS for function in functions):
            found = _display_functions(self._tree)
        if any(isinstance(function.body[-1], ast.Raise) for function in functions):
            found |= _error_wording_functions(self._tree)
        return found

    def __contains__(self, name: object) -> bool:
        return name in _DISPLAY_METHODS or (name in self._called and name in self._functions)


def _constant_default(stmt: ast.stmt) -> bool:
    """`pass`, a logging call, `return`/`return <constant>` or `<name> = <constant>`."""
    if isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and is_logging_call(stmt.value)):
        return True
    if isinstance(stmt, ast.Return):
        return stmt.value is None or isinstance(stmt.value, ast.Constant)
    if isinstance(stmt, ast.Assign):
        return all(isinstance(t, ast.Name) for t in stmt.targets) and isinstance(stmt.value, ast.Constant)
    return False


def _comment_lines(ctx: FileContext, start: int, end: int) -> list[str]:
    out = []
    for number in range(start, end + 1):
        text = _comment(ctx.lines[number - 1]) if 0 < number <= len(ctx.lines) else None
        if text and not _NOQA.search("#" + text):
            out.append(text)
    return out


def _guarded_probe(
    ctx: FileContext, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler, after: ast.stmt | None
) -> bool:
    """A try around one operation (its other statements only return or assign constants) whose
    handler falls back to a constant, with the expected failure documented next to it or the
    fallback announced by a warning right after the try (see the module docstring). A handler that
    falls off the end of a function whose try returns a result (an implicit `None` result) is not
    one. `after`: the statement following the try in its block, if any."""
    operations = [stmt for stmt in node.body if not _constant_default(stmt) and not _normalises(stmt)]
    if len(operations) != 1 or not handler.body or not all(_constant_default(stmt) for stmt in handler.body):
        return False
    if _fills_in_turns(operations[0], node.body):
        return False
    falls_through = not isinstance(handler.body[-1], ast.Return)
    if falls_through and isinstance(node.body[-1], ast.Return) and after is None:
        return False  # the try returns a result, the handler an implicit None
    if falls_through and warns(after):
        return True
    above: list[str] = []
    index = node.lineno - 2
    while index >= 0 and ctx.lines[index].strip().startswith("#"):
        above.insert(0, ctx.lines[index].strip().lstrip("#").strip())
        index -= 1
    inside = _comment_lines(ctx, node.lineno, handler.end_lineno or handler.lineno)
    text = " ".join([*above, *inside])
    if _EXPECTED_FAILURE.search(text) or _JUSTIFIED.search(text):
        return True
    return caught_names(handler) == ["Exception"] and _raises_on_purpose(ctx, operations[0])


# methods that add to the container they are called on
_FILLS = frozenset(["append", "extend", "add", "update", "setdefault", "insert", "appendleft", "extendleft"])


def _fills_in_turns(operation: ast.stmt, try_body: list[ast.stmt]) -> bool:
    """A loop (round 16) whose body writes into a container or object the try did not make: an item
    or attribute stored, or an adding method called (`_FILLS`), on a name the try body does not bind
    (`_package_map[pkg].append(name)` into a module-level map). That is one write per turn, not one
    operation: a failure part way leaves the first turns' writes in place, and a handler that falls
    back without undoing them keeps a partial result where a complete one is expected (diffusers'
    package map, cached for the process)."""
    if not isinstance(operation, (ast.For, ast.AsyncFor, ast.While)):
        return False
    local = {
        sub.id
        for stmt in try_body
        for sub in pysource.walk(stmt)
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store)
    }

    def root(expr: ast.expr) -> str | None:
        while isinstance(expr, (ast.Attribute, ast.Subscript)):
            expr = expr.value
        return expr.id if isinstance(expr, ast.Name) else None

    for sub in pysource.walk(operation):
        if isinstance(sub, (ast.Attribute, ast.Subscript)) and isinstance(sub.ctx, ast.Store):
            written = root(sub.value)
        elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr in _FILLS:
            written = root(sub.func.value)
        else:
            continue
        if written is not None and written not in local:
            return True
    return False


def _raises_on_purpose(ctx: FileContext, operation: ast.stmt) -> bool:
    """The operation calls, by simple name, a function defined at the top level of this file whose
    own body raises a new exception of a named class outside any handler (`if "TPU" not in kind:
    raise RuntimeError("not a TPU device")`; not `raise Exception(...)`, which says nothing a bug
    does not): the failure the probe expects is stated in that code, as a comment would state it
    (round 10). The caller checks the handler is `except Exception` (a bare or `BaseException`
    handler also takes Ctrl+C, which no `raise` explains)."""
    value = operation.value if isinstance(operation, (ast.Expr, ast.Return, ast.Assign, ast.AnnAssign)) else None
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)):
        return False
    name = value.func.id
    defined = top_level_function(ctx.tree, name)
    if defined is None:
        return False
    stack: list[ast.AST] = list(defined.body)
    while stack:
        sub = stack.pop()
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ExceptHandler)):
            continue
        if (
            isinstance(sub, ast.Raise)
            and isinstance(sub.exc, ast.Call)
            and ast.unparse(sub.exc.func) not in ("Exception", "BaseException")
        ):
            return True
        stack.extend(ast.iter_child_nodes(sub))
    return False


def _own_runtime_signal(ctx: FileContext, node: ast.Try | ast.TryStar, imports: Mapping[str, str]) -> bool:
    """A try of one statement whose one call goes, by simple name, to a function defined at the top
    level of this file that raises `RuntimeError(...)` itself, reads no name the file imports (no
    torch, no module of the repository) and calls only builtins that run no code they are handed
    (round 13, fairscale's `_get_count`: a dictionary lookup's "no match"). For `except
    RuntimeError`: the caught error is that function's own signal, and no device memory or
    compiler is reached to fail with an OOM, unless through a method of a value the caller hands it.
    Near miss: the function also calls torch or another function of the file."""
    if len(node.body) != 1:
        return False
    calls = [sub for sub in pysource.walk(node.body[0]) if isinstance(sub, ast.Call)]
    if len(calls) != 1 or not isinstance(calls[0].func, ast.Name):
        return False
    name = calls[0].func.id
    defined = top_level_function(ctx.tree, name)
    if defined is None:
        return False
    signals = False
    for sub in (inner for stmt in defined.body for inner in pysource.walk(stmt)):
        if isinstance(sub, ast.Name) and sub.id in imports:
            return False
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id not in BUILTINS_AT_HAND:
            return False
        if isinstance(sub, ast.Raise) and sub.exc is not None:
            raised = sub.exc.func if isinstance(sub.exc, ast.Call) else sub.exc
            signals = signals or (isinstance(raised, ast.Name) and raised.id == "RuntimeError")
    return signals


def _passes_error_on(ctx: FileContext, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """The caught error still reaches the caller by another way (round 13, `reviewbot.rules.error_reach`):
    kept and raised after the try, the last failure of a bounded retry ending the run, or (round 16
    for the catch-all too) any failure of the same call under another name, unguarded in the handler,
    or (round 23) an attribute the try was to set, left unset and checked by every caller, or (round
    24, `reviewbot.rules.kept_error`) kept and raised after the loop the handler leaves or by every
    caller its function returns it to."""
    return (
        deferred_reraise(ctx.tree, node, handler)
        or retry_fails_when_exhausted(ctx.tree, node, handler)
        or same_call_other_name(node, handler)
        or checked_attribute(ctx.tree, node, handler)
        or raised_after_loop(ctx.tree, node, handler)
        or raised_by_caller(ctx, node, handler)
        or hands_error_to_owner(handler)
        or repeats_statement(node, handler)
        or raises_when_spent(ctx.tree, node, handler)
    )


def _existing_route(ctx: FileContext, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """The handler falls back to a route the code already had (round 16): what the base revision did
    (`reviewbot.rules.previous_behaviour`: a flag whose fallback value selects the base's code, the
    base's code run in the handler, a new gate in front of the base's code, since round 24 a key left
    unset whose readers' default is the base's code), or what its function does outside every handler
    (`reviewbot.rules.own_route`), or (round 23) the function itself again with the optional step's
    flag off (`own_route.retried_without_step`), or (round 27) the state the code has when the `if`
    holding the try is not taken (`own_route.reset_to_skipped`)."""
    return (
        flag_selects_base(ctx, node, handler)
        or base_code_in_handler(ctx, node, handler)
        or gate_before_base(ctx, node, handler)
        or unset_key_selects_base(ctx, node, handler)
        or own_route(ctx.tree, node, handler)
        or retried_without_step(ctx.tree, node, handler)
        or reset_to_skipped(ctx.tree, node, handler)
    )


def _normalises(stmt: ast.stmt) -> bool:
    """An `if` without calls in its test whose branches only fall back to constants
    (`if git_hash is None: git_hash = "UNKNOWN"`): it normalises the operation's answer, it is no
    second operation."""
    if not isinstance(stmt, ast.If) or any(isinstance(sub, ast.Call) for sub in pysource.walk(stmt.test)):
        return False
    return all(_constant_default(sub) or _normalises(sub) for sub in [*stmt.body, *stmt.orelse])


def _names_expected_failure(ctx: FileContext, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """A comment directly above the try, in its body or in the handler names the failure the try
    expects (`_EXPECTED_FAILURE`: "if swap_tensors is not permitted", "raises when ..."); a reason
    alone ("# fall back") names none."""
    above: list[str] = []
    index = node.lineno - 2
    while index >= 0 and ctx.lines[index].strip().startswith("#"):
        above.insert(0, ctx.lines[index].strip().lstrip("#").strip())
        index -= 1
    body_end = node.body[-1].end_lineno or node.body[-1].lineno
    inside = [
        *_comment_lines(ctx, node.lineno, body_end),
        *_comment_lines(ctx, handler.lineno, handler.end_lineno or handler.lineno),
    ]
    return bool(_EXPECTED_FAILURE.search(" ".join([*above, *inside])))


def _named_alternative(ctx: FileContext, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """A narrow handler (not a catch-all) of a try of one statement with calls, whose comment names
    the failure it expects (`_names_expected_failure`), and whose alternative calls nothing but
    logging: it only rebinds values at hand (`torch.utils.swap_tensors` "not permitted when the
    tensor has weakrefs" -> `old.data = new.data`), the author's other route for that documented
    case. Used for `except RuntimeError`. A handler that runs other work (`return eager(fn)`) stays
    reported: an OOM of the try would be taken for the documented case and the work re-run."""
    names = caught_names(handler)
    if names is None or BROAD & set(names) or len(node.body) != 1 or len(_call_statements(node.body)) != 1:
        return False
    calls = (sub for stmt in handler.body for sub in pysource.walk(stmt) if isinstance(sub, ast.Call))
    if not all(is_logging_call(call) for call in calls):
        return False
    return _names_expected_failure(ctx, node, handler)


_HAND_OVER_METHODS = frozenset({"put", "put_nowait", "set_exception"})


def _queues_error(handler: ast.ExceptHandler) -> bool:
    """The handler hands the caught exception object itself to a consumer through a queue or a
    future (`await self.queue.put(e)`, `future.set_exception(e)`), whose reader raises it, and
    returns no substitute result. Putting anything else there (a sentinel, `None`, the error's
    text) stays reported: the reader cannot tell a failure from the end of the data. Since round 27
    the hand-over may stand in a loop or an `if` of the handler (`for future in futures: if not
    future.done(): future.set_exception(error)`, each waiting caller failed with the error), and
    `set_exception` may be handed any exception the handler holds (`set_exception(exception)`, the
    original error when a copy of it could not be built): a future takes only an exception, so its
    reader fails whichever it is."""
    if any(
        isinstance(sub, ast.Return) and sub.value is not None for stmt in handler.body for sub in pysource.walk(stmt)
    ):
        return False
    for stmt in _branches_flattened(_loops_opened(handler.body)):
        value = stmt.value if isinstance(stmt, ast.Expr) else None
        if isinstance(value, ast.Await):
            value = value.value
        if not (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr in _HAND_OVER_METHODS
            and len(value.args) == 1
            and isinstance(value.args[0], ast.Name)
        ):
            continue
        if value.args[0].id == handler.name or value.func.attr == "set_exception":
            return True
    return False


def _loops_opened(body: list[ast.stmt]) -> list[ast.stmt]:
    """`body` with each `for` loop replaced by the statements of its body, at any depth (round 27)."""
    opened: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, (ast.For, ast.AsyncFor)) and not stmt.orelse:
            opened.extend(_loops_opened(stmt.body))
        else:
            opened.append(stmt)
    return opened


# what a failure record may be built with: the error's text, its type's name, the traceback
_RECORD_CALLS = frozenset({"str", "repr", "type", "format", "traceback.format_exc", "traceback.format_exception"})
_RECORD_HAND_ON = frozenset({"put", "put_nowait", "send", "append", "set_result"})
_SUCCESS_KEYS = frozenset({"ok", "success", "succeeded"})


def _record_built(value: ast.AST) -> bool:
    """`value` calls nothing but `_RECORD_CALLS`: no substitute result is computed in it."""
    return all(not isinstance(sub, ast.Call) or ast.unparse(sub.func) in _RECORD_CALLS for sub in pysource.walk(value))


def _failure_record_call(value: ast.AST) -> bool:
    """`value` builds a record of a type named for a failure (`_Error(str(e))`, `FailedItem(msg=repr(e))`:
    a failure word among the called name's words) from arguments `_record_built` takes (round 27):
    the reader tells it from a result by its type, as it does a dict with an error key."""
    if not isinstance(value, ast.Call):
        return False
    words = {word.lower() for word in _WORD_SPLIT.split(callee(value)) if word}
    arguments = [*value.args, *(keyword.value for keyword in value.keywords)]
    return bool(words & _FAILURE_WORDS) and all(_record_built(argument) for argument in arguments)


def _says_failed(value: ast.AST) -> bool:
    """`value` holds a failure marker: a string, name or attribute with a failure word among its
    words (`"error"`, `"infra_error"`, `STATUS_INFRA_ERROR`), or `"ok": False` in a dict."""
    for sub in pysource.walk(value):
        if isinstance(sub, ast.Dict) and any(
            isinstance(key, ast.Constant)
            and key.value in _SUCCESS_KEYS
            and isinstance(item, ast.Constant)
            and item.value is False
            for key, item in zip(sub.keys, sub.values)
        ):
            return True
        word = (
            sub.value
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str)
            else sub.id
            if isinstance(sub, ast.Name)
            else sub.attr
            if isinstance(sub, ast.Attribute)
            else ""
        )
        if {part.lower() for part in _WORD_SPLIT.split(word) if part} & _FAILURE_WORDS:
            return True
    return False


def _error_record(handler: ast.ExceptHandler) -> bool | None:
    """The handler hands the error on as a failure record: besides logging calls, `pass`,
    `continue` and a bare `return`, it only binds values (to names, attributes or items), hands
    them to a queue, a pipe, a list or a future (`_RECORD_HAND_ON`) or returns them, built without
    any call but `_RECORD_CALLS` (no substitute is computed); one of the values names the caught
    exception other than by its class, and one says the unit failed (`_says_failed`; a failure word
    in a target's name is no record: `self.compile_error = str(e)`): `queue.put({
    "kind": "error", "error": repr(e)})`, `status = STATUS_INFRA_ERROR; reason = f"...{e}"`, and
    since round 27 a value of a type named for a failure (`_failure_record_call`: `q.put(_Error(str(e)))`). The
    reader of the record sees the failure and its message. True when neither the record nor a log
    call keeps the traceback (the one thing lost), False when one does, None for any other handler."""
    name = handler.name
    if name is None:
        return None
    values: list[ast.AST] = []
    targets: list[ast.AST] = []  # checked for calls only: a failure word in a target's name is no record
    traceback_kept = False
    for stmt in handler.body:
        if isinstance(stmt, ast.Expr) and is_logging_call(stmt.value):
            assert isinstance(stmt.value, ast.Call)
            traceback_kept = traceback_kept or carries_traceback(stmt.value)
            continue
        if isinstance(stmt, (ast.Pass, ast.Continue)) or (isinstance(stmt, ast.Return) and stmt.value is None):
            continue
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if isinstance(call, ast.Await):
            call = call.value
        if isinstance(stmt, ast.Assign):
            values.append(stmt.value)
            targets += stmt.targets
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            values.append(stmt.value)
            targets.append(stmt.target)
        elif isinstance(stmt, ast.Return):
            values.append(stmt.value)
        elif (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr in _RECORD_HAND_ON
            and _record_built(call.func.value)
        ):
            values += [*call.args, *(keyword.value for keyword in call.keywords)]
        else:
            return None
    if not values or not all(_record_built(node) or _failure_record_call(node) for node in values):
        return None
    if not all(_record_built(node) for node in targets):
        return None
    if not any(_names_exception(value, name) for value in values) or not any(_says_failed(v) for v in values):
        return None
    return not (traceback_kept or any("traceback.format_exc" in ast.unparse(value) for value in values))


def _failure_status(tree: ast.Module, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """The handler's value is the unit's failure, recorded as its status without the error (round 25):
    besides logging calls and `pass`, it only binds plain names to dict displays built without calls
    (`_record_built`), one of which maps a key to a status string (one or two words) holding a failure
    word (`{"status": "crashed", "elapsed_time": -1.0}`), and its function reads one of those names
    after the try. Whoever reads the record sees that the unit failed (brevitas's benchmark table
    shows the job as crashed), not why: `P3` `broad-except.failure-status`. General because it reads
    what the fallback value says (a failure, not a substitute result), not where it is used. A
    handler that names the caught exception is `_error_record`'s; near misses, still the swallow: a
    failure word only in a message or a target's name, a record nothing reads after the try."""
    if handler.name is not None and any(
        isinstance(sub, ast.Name) and sub.id == handler.name for stmt in handler.body for sub in pysource.walk(stmt)
    ):
        return False
    bound: set[str] = set()
    status = False
    for stmt in handler.body:
        if isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and is_logging_call(stmt.value)):
            continue
        if not (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Dict)
            and _record_built(stmt.value)
        ):
            return False
        bound.add(stmt.targets[0].id)
        status = status or any(
            isinstance(key, ast.Constant)
            and isinstance(value, ast.Constant)
            and isinstance(value.value, str)
            and len([part for part in _WORD_SPLIT.split(value.value) if part]) <= 2
            and _says_failed(value)
            for key, value in zip(stmt.value.keys, stmt.value.values)
        )
    function = innermost_function(tree, node)
    if not status or function is None:
        return False
    end = node.end_lineno or node.lineno
    return any(
        isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.id in bound and sub.lineno > end
        for sub in pysource.walk(function)
    )


def _hands_error_on(ctx: FileContext, handler: ast.ExceptHandler) -> bool:
    """The handler returns the caught exception, or its text, as one element of a tuple result
    (`return str(e), float("inf")`, `return None, e`), its other statements only logging, and no
    caller in the changed files drops that element (`_error_dropped`): the failure travels to the
    caller with the result (a candidate that loses a selection, an errors-as-values API). A bare
    `return str(e)` looks like a normal result and is no such hand-on; nor is one whose caller
    unpacks the error into `_` (`can_use, _ = backend.verify(...)`)."""
    if handler.name is None or not handler.body:
        return False
    last = handler.body[-1]
    if not (isinstance(last, ast.Return) and isinstance(last.value, ast.Tuple)):
        return False
    if not all(isinstance(stmt, ast.Expr) and is_logging_call(stmt.value) for stmt in handler.body[:-1]):
        return False

    def carries(element: ast.expr) -> bool:
        if isinstance(element, ast.Name):
            return element.id == handler.name
        return (
            isinstance(element, ast.Call)
            and isinstance(element.func, ast.Name)
            and element.func.id in ("str", "repr")
            and len(element.args) == 1
            and isinstance(element.args[0], ast.Name)
            and element.args[0].id == handler.name
        )

    positions = [i for i, element in enumerate(last.value.elts) if carries(element)]
    if not positions:
        return False
    function = ctx.qualname(handler.lineno).rsplit(".", 1)[-1]
    return not (function and _error_dropped(ctx, function, positions, last.value))


def _error_dropped(ctx: FileContext, function: str, positions: list[int], returned: ast.Tuple) -> bool:
    """Some call of `function` (by simple name, `f(...)` or `obj.f(...)`) in this file or another
    changed file of the head revision discards the tuple result's error elements at `positions`: it
    unpacks the result into a tuple of as many targets whose targets there are all `_`-prefixed
    names (`can_use, _ = be.verify(...)`), drops the whole result (a call as a statement), or
    (round 16) tests the handler's constant right after and reads none of those targets on the branch
    the constant takes nor after it (`status, response = search(q)`, then `if status != 200: ret =
    "None"`: `_failure_branch_drops`)."""
    trees = [ctx.tree, *(tree for path, tree in ctx.changed_trees("head") if path != ctx.path)]
    width = len(returned.elts)
    for tree in trees:
        for node in pysource.nodes(tree):
            for block in statement_blocks(node):
                for index, stmt in enumerate(block):
                    value = stmt.value if isinstance(stmt, (ast.Assign, ast.Expr)) else None
                    if not (isinstance(value, ast.Call) and callee(value) == function):
                        continue
                    if isinstance(stmt, ast.Expr):
                        return True
                    for target in stmt.targets:
                        if not (isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == width):
                            continue
                        dropped = [target.elts[i] for i in positions]
                        if all(isinstance(t, ast.Name) and t.id.startswith("_") for t in dropped):
                            return True
                        if _failure_branch_drops(block[index + 1 :], target, positions, returned):
                            return True
    return False


_COMPARE = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
    ast.Is: lambda a, b: a is b,
    ast.IsNot: lambda a, b: a is not b,
}


def _is_constant(expr: ast.expr) -> bool:
    """A constant, or a sign before a numeric one (`-1`)."""
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        expr = expr.operand
        return (
            isinstance(expr, ast.Constant) and isinstance(expr.value, (int, float)) and not isinstance(expr.value, bool)
        )
    return isinstance(expr, ast.Constant)


def _number_or_constant(expr: ast.expr) -> object:
    """The value of an `_is_constant` expression."""
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.operand, ast.Constant):
        value = expr.operand.value
        return -value if isinstance(expr.op, ast.USub) else value
    return expr.value if isinstance(expr, ast.Constant) else None


def _failure_branch_drops(
    rest: list[ast.stmt], target: ast.Tuple | ast.List, positions: list[int], returned: ast.Tuple
) -> bool:
    """`rest` (the statements after the unpacking into `target`) starts with an `if` whose test is one
    comparison of an unpacked name with a constant (`if status != 200:`), the handler's `returned`
    tuple holds a constant at that name's position (`-1`), and neither the branch that constant takes
    nor the statements after the `if` read the names unpacked at the error `positions`."""
    if not (rest and isinstance(rest[0], ast.If)):
        return False
    test = rest[0].test
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _COMPARE):
        return False
    constants = {
        element.id: _number_or_constant(returned.elts[i])
        for i, element in enumerate(target.elts)
        if isinstance(element, ast.Name) and _is_constant(returned.elts[i])
    }
    sides = [test.left, test.comparators[0]]
    if not (
        any(isinstance(side, ast.Name) and side.id in constants for side in sides)
        and all(
            isinstance(side, ast.Constant) or (isinstance(side, ast.Name) and side.id in constants) for side in sides
        )
    ):
        return False
    left, right = (constants[side.id] if isinstance(side, ast.Name) else _number_or_constant(side) for side in sides)
    try:
        taken = _COMPARE[type(test.ops[0])](left, right)
    except TypeError:  # an ordering of unlike constants (`None < 0`): no branch is known
        return False
    branch = rest[0].body if taken else rest[0].orelse
    errors = {element.id for i, element in enumerate(target.elts) if i in positions and isinstance(element, ast.Name)}
    if len(errors) != len(positions):
        return False
    read = {
        sub.id
        for stmt in [*branch, *rest[1:]]
        for sub in pysource.walk(stmt)
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load)
    }
    return not errors & read


def _version_probe(node: ast.Try | ast.TryStar, handler: ast.ExceptHandler, imports: dict[str, str]) -> bool:
    """A try that only reads an imported library's version and works on it
    (`cudnn.backend_version() < 92400`, `map(int, cudnn.__version__.split(".")[:2])`), with an
    `except Exception` handler that only falls back to a constant: a version that cannot be read or
    parsed means the feature gated on it is not usable, the same answer as a version too old. Every
    call in the try must be a version query of a module this file imports (a name or attribute with
    `version` in it on its function's path, `<module>.<...>`), take one as an argument, or work on a
    name the try assigned; any other call (`pynvml.nvmlInit()`, the repository's own
    `self.installed_version()`) keeps the finding, and so does a bare or `BaseException` handler
    (Ctrl+C is no unreadable version)."""
    if caught_names(handler) != ["Exception"] or not node.body or not handler.body:
        return False
    if not all(_constant_default(stmt) for stmt in handler.body):
        return False

    def mentions_version(expr: ast.AST) -> bool:
        root = expr
        while isinstance(root, (ast.Attribute, ast.Call, ast.Subscript)):
            root = root.func if isinstance(root, ast.Call) else root.value
        if not (isinstance(root, ast.Name) and root.id in imports):
            return False
        for sub in pysource.walk(expr):
            if isinstance(sub, ast.expr) and "version" in last_name(sub).lower():
                return True
        return False

    assigned: set[str] = set()
    found = False
    for stmt in node.body:
        for call in (sub for sub in pysource.walk(stmt) if isinstance(sub, ast.Call)):
            if mentions_version(call.func):
                found = True
                continue
            args = [*call.args, *(k.value for k in call.keywords)]
            used = {sub.id for arg in [call.func, *args] for sub in pysource.walk(arg) if isinstance(sub, ast.Name)}
            if not (used & assigned or any(mentions_version(arg) for arg in args)):
                return False
        for sub in pysource.walk(stmt):
            if isinstance(sub, ast.Assign):
                assigned |= {n.id for t in sub.targets for n in pysource.walk(t) if isinstance(n, ast.Name)}
    return found


def _following(tree: ast.AST) -> dict[int, ast.stmt | None]:
    """id of each try statement -> the statement that runs after it when its handler falls through:
    the next one in its block, or for the last statement of an `if`/`else`/`with` block the one after
    that compound statement (None at the end of a function, module or loop body)."""
    out: dict[int, ast.stmt | None] = {}

    def walk(block: list[ast.stmt], after: ast.stmt | None) -> None:
        for i, stmt in enumerate(block):
            nxt = block[i + 1] if i + 1 < len(block) else after
            if isinstance(stmt, (ast.Try, ast.TryStar)):
                out[id(stmt)] = nxt
            if isinstance(stmt, (ast.If, ast.With, ast.AsyncWith)):
                for field in ("body", "orelse"):
                    walk(getattr(stmt, field, []), nxt)
            elif isinstance(stmt, (ast.Try, ast.TryStar)):
                walk(stmt.body, None)
                walk(stmt.orelse, nxt)
                walk(stmt.finalbody, nxt)
                for handler in stmt.handlers:
                    walk(handler.body, nxt)
            elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
                walk(stmt.body, None)
                walk(stmt.orelse, nxt)
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                walk(stmt.body, None)
            elif isinstance(stmt, ast.Match):
                for case in stmt.cases:
                    walk(case.body, nxt)

    assert isinstance(tree, ast.Module)
    walk(tree.body, None)
    return out


def _docstring_fallbacks(tree: ast.AST) -> frozenset[int]:
    """ids of the handlers inside a function (nested functions included) whose docstring states a
    fallback (`_DOC_FALLBACK`) and that only hand back a value already at hand: logging, `pass`,
    `return <name or constant>`, `<name> = <name or constant>`. The fallback is the function's
    documented behaviour, and its value is the function's own (an argument, a result computed before
    the try), not a substitute computed in the handler (`return fn(*args)` stays reported)."""
    found: set[int] = set()
    for node in pysource.nodes(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        doc = ast.get_docstring(node)
        if not doc or not _DOC_FALLBACK.search(doc):
            continue
        for sub in pysource.walk(node):
            if isinstance(sub, ast.ExceptHandler) and sub.body and all(_value_at_hand(stmt) for stmt in sub.body):
                found.add(id(sub))
    return frozenset(found)


def _value_at_hand(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and is_logging_call(stmt.value)):
        return True
    plain = (ast.Name, ast.Constant)
    if isinstance(stmt, ast.Return):
        return stmt.value is None or isinstance(stmt.value, plain)
    if isinstance(stmt, ast.Assign):
        return all(isinstance(t, ast.Name) for t in stmt.targets) and isinstance(stmt.value, plain)
    return False


def _package_probe(node: ast.Try | ast.TryStar, handler: ast.ExceptHandler, imports: dict[str, str]) -> bool:
    """A lookup of an installed distribution (`importlib.metadata.version/metadata/...`, `_PACKAGE_LOOKUPS`)
    as the try's first statement, whose other statements only work on its answer (every call in them
    is a method of, or takes, a name the try assigned: `meta.get("Version")`,
    `version.parse(plugin_version)`), with a handler that only falls back to a constant: "not
    installed" is the expected case of such a lookup, and an unparsable answer means no usable
    version either. A later call that does not use the answer (`init_device()`) keeps the finding."""
    if not node.body or not handler.body or not all(_constant_default(stmt) for stmt in handler.body):
        return False
    first = node.body[0]
    lookup = first.value if isinstance(first, (ast.Assign, ast.Expr, ast.Return)) else None
    if not isinstance(lookup, ast.Call):
        return False
    func = lookup.func
    dotted = ast.unparse(func)
    head, _, rest = dotted.partition(".")
    target = imports.get(head, head) + (f".{rest}" if rest else "")
    if target not in _PACKAGE_LOOKUPS:
        return False
    assigned = {t.id for t in first.targets if isinstance(t, ast.Name)} if isinstance(first, ast.Assign) else set()
    for stmt in node.body[1:]:
        for call in (sub for sub in pysource.walk(stmt) if isinstance(sub, ast.Call)):
            used = {
                sub.id for arg in [call.func, *call.args] for sub in pysource.walk(arg) if isinstance(sub, ast.Name)
            }
            if not used & assigned:
                return False
        for sub in pysource.walk(stmt):
            if isinstance(sub, ast.Assign):
                assigned |= {t.id for t in sub.targets if isinstance(t, ast.Name)}
    return True


def _imported_names(body: list[ast.stmt]) -> list[tuple[ast.Import | ast.ImportFrom, str]] | None:
    """(statement, bound name) of each import of a try body made only of import statements, else None."""
    if not body or not all(isinstance(stmt, (ast.Import, ast.ImportFrom)) for stmt in body):
        return None
    out: list[tuple[ast.Import | ast.ImportFrom, str]] = []
    for stmt in body:
        assert isinstance(stmt, (ast.Import, ast.ImportFrom))
        for alias in stmt.names:
            out.append((stmt, alias.asname or alias.name.split(".")[0]))
    return out


def _own_module(ctx: FileContext, stmt: ast.Import | ast.ImportFrom) -> bool:
    """The import names a module of the repository: a relative import, or a top-level name that is a
    directory on the importing file's own path (`fla.ops...` from `fla/ops/x.py`)."""
    if isinstance(stmt, ast.ImportFrom):
        if stmt.level:
            return True
        tops = [(stmt.module or "").split(".")[0]]
    else:
        tops = [alias.name.split(".")[0] for alias in stmt.names]
    folders = set(ctx.path.split("/")[:-1])
    return any(top in folders for top in tops)


def _optional_dependency(ctx: FileContext, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """A try of only imports of modules outside the repository (`from PIL import Image`), followed at
    most by constant assignments of a success flag (`WITH_NUMBA = True`), that the file imports
    nowhere else outside a try or the body of an `if` that tests the flag, whose handler records the
    absence in a constant (`_HAS_PIL = False`; otherwise only `pass` and logging): an optional
    third-party dependency;
    "not installed" (or installed broken) means the feature it serves is unavailable, the flag says
    so to the code that needs it, and no code of the repository runs in the try. Stay reported: an
    import of the repository's own module (`from . import _C`: a broken build is a bug the fallback
    hides), of a package the file needs anyway (`torch._inductor...` in a file that imports `torch`:
    its internals moved, not an optional dependency missing), and a handler that records nothing
    (`return`: the work is skipped without a trace)."""
    body = list(node.body)
    while body and isinstance(body[-1], ast.Assign) and _constant_default(body[-1]):
        body.pop()  # a success flag after the imports (`WITH_NUMBA = True`)
    imported = _imported_names(body)
    if imported is None or not handler.body or not all(_constant_default(stmt) for stmt in handler.body):
        return False
    if not any(isinstance(stmt, ast.Assign) for stmt in handler.body):
        return False
    if any(_own_module(ctx, stmt) for stmt, _ in imported):
        return False
    tops = {
        (stmt.module or "").split(".")[0] if isinstance(stmt, ast.ImportFrom) else alias.name.split(".")[0]
        for stmt, _ in imported
        for alias in stmt.names
    }
    guarded = {id(sub) for t in pysource.nodes(ctx.tree) if isinstance(t, (ast.Try, ast.TryStar)) for sub in t.body}
    guarded.update(_under_flag(ctx.tree, handler))
    return not imports_any(ctx.tree, tops, guarded)


def _under_flag(tree: ast.Module, handler: ast.ExceptHandler) -> set[int]:
    """Ids of the nodes in the body of every `if` whose test reads a name the handler assigns (the
    availability flag): code that runs only when the optional import succeeded."""
    flags = {
        target.id
        for stmt in handler.body
        if isinstance(stmt, ast.Assign)
        for target in stmt.targets
        if isinstance(target, ast.Name)
    }
    return {
        id(sub)
        for node in pysource.nodes(tree)
        if isinstance(node, ast.If) and any(isinstance(n, ast.Name) and n.id in flags for n in pysource.walk(node.test))
        for stmt in node.body
        for sub in pysource.walk(stmt)
    }


_NOT_INSTALLED = frozenset(["ImportError", "ModuleNotFoundError"])


def _reported_optional_import(ctx: FileContext, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """An optional extension: the try starts by importing a module outside the repository (not
    `_own_module`), and the handler reports every error but "not installed" with the error itself
    (`_reports_caught`, directly or under `if not isinstance(e, ImportError):`) and otherwise only
    binds stand-ins (`_stub_binding`: `WITH_X = False`, `pkg = object`, a stub class raising on use).
    Any failure of the extension other than its absence, a bug in it or a broken build, is shown with
    its cause; its absence is the designed state. A handler that stays silent for errors other than
    the import's (`if isinstance(e, ImportError): warn(e)`), or that reports without the error, stays
    reported."""
    first = node.body[0] if node.body else None
    if not isinstance(first, (ast.Import, ast.ImportFrom)) or _own_module(ctx, first) or not handler.body:
        return False
    reported = False
    for stmt in handler.body:
        if _reports_caught(stmt, handler.name) or _reports_unexpected(stmt, handler.name):
            reported = True
        elif not _stub_binding(stmt, handler):
            return False
    return reported


def _reports_unexpected(stmt: ast.stmt, name: str | None) -> bool:
    """`if not isinstance(<caught>, ImportError): <reports it>` (no `else`): every error but "not
    installed" (`ImportError`, `ModuleNotFoundError`) is reported with its cause."""
    if name is None or not isinstance(stmt, ast.If) or stmt.orelse or not stmt.body:
        return False
    test = stmt.test
    if not (isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and isinstance(test.operand, ast.Call)):
        return False
    call = test.operand
    if not (isinstance(call.func, ast.Name) and call.func.id == "isinstance" and len(call.args) == 2):
        return False
    subject, types = call.args
    listed = types.elts if isinstance(types, ast.Tuple) else [types]
    if not (isinstance(subject, ast.Name) and subject.id == name):
        return False
    if not all(isinstance(t, ast.Name) and t.id in _NOT_INSTALLED for t in listed):
        return False
    return all(_reports_caught(sub, name) for sub in stmt.body)


def _stub_binding(stmt: ast.stmt, handler: ast.ExceptHandler) -> bool:
    """A stand-in bound where an optional module is missing: `pass`, a constant or a name assigned
    (`WITH_X = False`, `pkg = object`), a class defined (a stub), or an instance of a class this
    handler defines assigned (`pkg = PkgStub()`)."""
    if isinstance(stmt, (ast.Pass, ast.ClassDef)) or _constant_default(stmt):
        return True
    if not (isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets)):
        return False
    value = stmt.value
    if isinstance(value, ast.Name):
        return True
    stubs = {sub.name for sub in handler.body if isinstance(sub, ast.ClassDef)}
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id in stubs
        and not value.args
        and not value.keywords
    )


def _deferred_import_failure(tree: ast.AST, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """A try of only imports whose `except Exception` handler only warns (`warnings.warn`, logging at
    warning level or above) and binds nothing, while nothing else in the file binds the imported
    names: the import's failure is announced, and any use of a name it would have bound fails loudly
    (`NameError`) instead of taking a substitute. A handler that binds a fallback (`_C = None`,
    `enabled = False`), a silent one, and a name bound elsewhere too (a default above the try) stay
    reported: there the feature quietly goes missing."""
    imported = _imported_names(node.body)
    if imported is None or caught_names(handler) != ["Exception"] or not handler.body:
        return False
    if not all(warns(stmt) for stmt in handler.body):
        return False
    names = {name for _, name in imported}
    for sub in pysource.nodes(tree):
        if sub is node:
            continue
        if isinstance(sub, (ast.Import, ast.ImportFrom)) and any(sub is stmt for stmt, _ in imported):
            continue
        bound: set[str] = set()
        if isinstance(sub, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
            bound = {n.id for t in targets for n in pysource.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound = {sub.name}
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            bound = bound_by_import(sub)
        if bound & names:
            return False
    return True


def _module_level_tries(tree: ast.Module) -> frozenset[int]:
    """ids of the try statements that run at import: directly in the module body or in its
    top-level `if`/`else` blocks."""
    found: set[int] = set()
    blocks = [tree.body]
    while blocks:
        for stmt in blocks.pop():
            if isinstance(stmt, (ast.Try, ast.TryStar)):
                found.add(id(stmt))
            elif isinstance(stmt, ast.If):
                blocks.extend([stmt.body, stmt.orelse])
    return frozenset(found)


def _optional_rewrap(node: ast.Try | ast.TryStar, handler: ast.ExceptHandler, at_import: bool) -> bool:
    """At import (`_module_level_tries`), a try of one assignment that rebinds a name to a wrapped
    version of itself (`kernel = triton.autotune(configs=...)(kernel)`) whose handler only passes:
    when the wrapper cannot be built (no device on this machine) the original definition stays, and
    no work of the program runs in the try. A different name bound (`fast = wrap(kernel)`, left
    unbound when it fails), a handler that does anything, and the same try inside a function stay
    reported."""
    if not at_import or len(node.body) != 1 or not all(isinstance(stmt, ast.Pass) for stmt in handler.body):
        return False
    stmt = node.body[0]
    if not (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and isinstance(stmt.value, ast.Call)
    ):
        return False
    name = stmt.targets[0].id
    call: ast.expr = stmt.value
    while isinstance(call, ast.Call):
        if any(isinstance(arg, ast.Name) and arg.id == name for arg in call.args):
            return True
        call = call.func
    return False


_REMOVALS = frozenset(["shutil.rmtree", "os.remove", "os.unlink", "os.rmdir", "os.removedirs"])


def _discards_output(ctx: FileContext, handler: ast.ExceptHandler, imports: dict[str, str]) -> bool:
    """The handler logs the traceback (`logger.exception`, `exc_info=`) and otherwise only removes
    files or directories (`shutil.rmtree(staging)`, `os.remove(tmp)`, `path.unlink(...)`), passes or
    returns nothing: a write that failed is reported with its cause and its partial output
    discarded, so nothing half-written is published (a cache entry the next run recomputes). A
    removal without the traceback, or a handler that hands back a substitute, stays reported."""
    if not handler.body or not any(_logs_traceback(stmt) for stmt in handler.body):
        return False
    removes = False
    for stmt in handler.body:
        if _logs_or_leaves(stmt):
            continue
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
            return False
        func = stmt.value.func
        dotted = ast.unparse(func)
        head, _, rest = dotted.partition(".")
        target = imports.get(head, head) + (f".{rest}" if rest else "")
        if target in _REMOVALS or (isinstance(func, ast.Attribute) and func.attr in ("unlink", "rmdir")):
            removes = True
            continue
        return False
    return removes


def _logs_traceback(stmt: ast.stmt) -> bool:
    """A logging call statement that carries the traceback (`carries_traceback`)."""
    value = stmt.value if isinstance(stmt, ast.Expr) else None
    return isinstance(value, ast.Call) and is_logging_call(value) and carries_traceback(value)


def _helper_raises(ctx: FileContext, handler: ast.ExceptHandler) -> bool:
    """The handler's last statement calls a function of the revision that always raises
    (`ExceptionIndex.always_raises`: `error.customized_op_replace_error(e)`): it converts through a
    helper, nothing falls back."""
    last = handler.body[-1] if handler.body else None
    value = last.value if isinstance(last, (ast.Expr, ast.Return)) else None
    if isinstance(value, ast.Await):
        value = value.value
    if not isinstance(value, ast.Call):
        return False
    name = callee(value)
    return bool(name) and ctx.exceptions().always_raises(name)


def _falls_into_raise(handler: ast.ExceptHandler, after: ast.stmt | None) -> str | None:
    """The type raised by the statement the handler falls through to, when that statement is a
    `raise X(...)` and nothing in the handler leaves another way (`return`, `break`, `continue`,
    `raise`): the handler only prepares the error (`msg = f"{msg} ({e})"`) and every error of the
    try, an `AssertionError` included, ends in that raise (a conversion written after the try).
    None otherwise. `after`: `_following`."""
    if not (isinstance(after, ast.Raise) and after.exc is not None):
        return None
    pending: list[ast.AST] = list(handler.body)
    while pending:
        sub = pending.pop()
        if isinstance(sub, (ast.Return, ast.Break, ast.Continue, ast.Raise)):
            return None
        if not isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            pending.extend(ast.iter_child_nodes(sub))
    target = after.exc.func if isinstance(after.exc, ast.Call) else after.exc
    return ast.unparse(target)


def _alternatives_tries(tree: ast.AST) -> frozenset[int]:
    """ids of the tries that try alternatives in turn: the try stands directly in a `for` loop's body,
    a success leaves the loop (its body or its `else:` ends in `return` or `break`), and the loop's
    exhaustion raises (its `else:` or the statements after it, past assignments and logging, reach
    an unconditional `raise`). Whichever error one alternative raises, the caller gets an answer from
    another or the error of the exhaustion: nothing is hidden unless some alternative succeeds (a
    validator `or_`, candidate decoders, mirrors). The handlers themselves are checked by
    `_alternatives`."""
    found: set[int] = set()

    def raises_next(block: list[ast.stmt]) -> bool:
        for stmt in block:
            if isinstance(stmt, ast.Raise):
                return stmt.exc is not None
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)) or (
                isinstance(stmt, ast.Expr) and is_logging_call(stmt.value)
            ):
                continue
            return False
        return False

    def leaves(block: list[ast.stmt]) -> bool:
        return bool(block) and isinstance(block[-1], (ast.Return, ast.Break))

    for node in pysource.nodes(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            for i, loop in enumerate(block):
                if not isinstance(loop, (ast.For, ast.AsyncFor)):
                    continue
                exhausted = loop.orelse or block[i + 1 :]
                if not raises_next(exhausted):
                    continue
                for stmt in loop.body:
                    if isinstance(stmt, (ast.Try, ast.TryStar)) and (leaves(stmt.body) or leaves(stmt.orelse)):
                        found.add(id(stmt))
    return frozenset(found)


def _alternatives(handler: ast.ExceptHandler) -> bool:
    """A handler of an `_alternatives_tries` try that only moves on to the next alternative:
    `continue`, `pass` or logging."""
    return bool(handler.body) and all(
        isinstance(stmt, (ast.Continue, ast.Pass)) or (isinstance(stmt, ast.Expr) and is_logging_call(stmt.value))
        for stmt in handler.body
    )


def _loop_tries(tree: ast.AST) -> set[int]:
    """ids of the try statements standing directly in the body of a loop."""
    found: set[int] = set()
    for node in pysource.nodes(tree):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            found.update(id(stmt) for stmt in node.body if isinstance(stmt, (ast.Try, ast.TryStar)))
    return found


def _after_catch_all(node: ast.Try | ast.TryStar, index: int) -> bool:
    """Handler `index` of `node` is a bare `except:` or `except BaseException` after a clause that
    catches `Exception` (round 27): every error is taken before it, so it only receives
    `KeyboardInterrupt`, `SystemExit` and `GeneratorExit` (pytorch/benchmark's model loop)."""
    names = caught_names(node.handlers[index])
    if names is not None and "BaseException" not in names:
        return False
    return any(
        (earlier := caught_names(other)) is not None and "Exception" in earlier for other in node.handlers[:index]
    )


def _turn_ending_tries(tree: ast.AST) -> set[int]:
    """ids of the try statements that end a turn of a loop from inside `if` blocks (round 27): the
    last statement of a branch of an `if` that is itself the last statement of the loop's body (or
    of such a branch), to any depth. After their handler the turn is over, as after a try standing
    directly in the loop's body (`_loop_tries`)."""
    found: set[int] = set()

    def last_of(block: list[ast.stmt]) -> None:
        if not block:
            return
        stmt = block[-1]
        if isinstance(stmt, (ast.Try, ast.TryStar)):
            found.add(id(stmt))
        elif isinstance(stmt, ast.If):
            last_of(stmt.body)
            last_of(stmt.orelse)

    for node in pysource.nodes(tree):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)) and isinstance(node.body[-1], ast.If):
            last_of([node.body[-1]])
    return found


def _is_test_path(path: str) -> bool:
    parts = path.split("/")
    name = parts[-1]
    return "tests" in parts[:-1] or "test" in parts[:-1] or name.startswith("test_") or name.endswith("_test.py")


def _import_map(ctx: FileContext) -> dict[str, str]:
    return import_map(ctx.path, ctx.tree)


def import_map(path: str, tree: ast.Module) -> dict[str, str]:
    """Local name -> dotted target for the imports of the file at `path` (`from a import b as c`:
    `c` -> `a.b`; `import a.b`: `a` -> `a`; `import a.b as c`: `c` -> `a.b`), relative imports
    resolved against the file's own package."""
    own = module_name(path).split(".")
    package = own if path.endswith("__init__.py") else own[:-1]
    out: dict[str, str] = {}
    for node in pysource.statements(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                out[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            for alias in node.names:
                out[alias.asname or alias.name] = f"{module}.{alias.name}" if module else alias.name
    return out


def _called_modules(ctx: FileContext, body: list[ast.stmt], imports: Mapping[str, str]) -> set[str]:
    """Where the calls in `body` lead: the dotted import target of each call's root name (`f()` for
    `from m import f` gives `m.f`; `m.f()` for `import m` gives `m.f`), this file's module for local
    names, `self` and `cls`. One level only: what the called module calls in turn is not followed.
    `imports`: the file's `import_map`."""
    own = module_name(ctx.path)
    out: set[str] = set()
    for stmt in body:
        for call in pysource.walk(stmt):
            if not isinstance(call, ast.Call):
                continue
            chain: list[str] = []
            func = call.func
            while isinstance(func, ast.Attribute):
                chain.insert(0, func.attr)
                func = func.value
            if not isinstance(func, ast.Name):
                continue
            target = imports.get(func.id)
            out.add(".".join([target, *chain]) if target else own)
    return out


def _reaches(raised_in: str, called: set[str]) -> bool:
    """The module raising a class is where one of the calls leads (`m.f` leads into `m`; a package
    import covers its submodules; a `src/` layout prefix is tolerated)."""
    dotted = "." + raised_in
    return any(
        raised_in == name
        or name.startswith(raised_in + ".")
        or raised_in.startswith(name + ".")
        or dotted.endswith("." + name)
        or f".{name}." in dotted + "."
        for name in called
    )


def _unhandled_subclasses(
    ctx: FileContext, node: ast.Try | ast.TryStar, index: int, caught: list[str], imports: Mapping[str, str]
) -> list[ExceptionClass]:
    """The repository's subclasses of the builtin types in `caught` that reach handler `index`: raised
    in a module the try body calls into (`_called_modules`), and not handled first."""
    handler = node.handlers[index]
    handled: set[str] = set(caught)
    for earlier in node.handlers[:index]:
        handled |= set(caught_names(earlier) or [])
    handled |= {sub.id for sub in pysource.walk(handler) if isinstance(sub, ast.Name)}
    handled |= {sub.attr for sub in pysource.walk(handler) if isinstance(sub, ast.Attribute)}
    in_test = _is_test_path(ctx.path)
    exceptions = ctx.exceptions()
    # a repository class handled first takes its own subclasses with it
    handled_full = {
        sub.full_name
        for name in handled
        if name not in BUILTIN_EXCEPTIONS and exceptions.get(name) is not None
        for sub in [exceptions.get(name), *exceptions.subclasses_of(name)]
        if sub is not None
    }
    called = _called_modules(ctx, node.body, imports)
    found: dict[str, ExceptionClass] = {}
    for name in caught:
        for cls in exceptions.subclasses_of(name):
            if cls.name in handled or cls.full_name in handled_full or (not in_test and _is_test_path(cls.path)):
                continue
            if not any(_reaches(module, called) for module in exceptions.raised_in(cls.name)):
                continue
            found.setdefault(cls.full_name, cls)
    return list(found.values())


def _fallback_sites(ctx: FileContext, target: str, handler: ast.ExceptHandler) -> list[CatchSite]:
    """The revision's `except` clauses that catch `target` (by its name or a repository base class
    of it), do not re-raise it, and are on a call path from the converting handler: their try body
    encloses the handler or calls (transitively, `ExceptionIndex.reaching`) the function holding it.
    There a converted error is taken for the fallback's failure; a clause of the same type elsewhere
    never sees it."""
    index = ctx.exceptions()
    names = [target.rsplit(".", 1)[-1], *(c.name for c in index.ancestors_of(target.rsplit(".", 1)[-1]))]
    candidates: dict[tuple[str, int], CatchSite] = {}
    for name in names:
        for site in index.handlers_of(name):
            if not site.reraises and (site.path, site.line) != (ctx.path, handler.lineno):
                candidates.setdefault((site.path, site.line), site)
    if not candidates:
        return []
    qualname = ctx.qualname(handler.lineno)
    parts = qualname.split(".") if qualname else []
    entry = {parts[-1]} if parts else set()
    if len(parts) >= 2 and parts[-1] in _CONSTRUCTION:
        entry.add(parts[-2])  # `Cls()` runs `Cls.__init__`
    reaching = index.reaching(entry) if entry else frozenset()
    sites = [
        site
        for site in candidates.values()
        if (site.path == ctx.path and site.try_lines[0] <= handler.lineno <= site.try_lines[1])
        or site.body_calls & reaching
    ]
    return sorted(sites, key=lambda site: (site.path, site.line))


def _handler_finding(
    ctx: FileContext,
    handler: ast.ExceptHandler,
    rule: str,
    severity: Severity,
    message_id: str,
    params: dict[str, object],
    details: str = "",
    extra: dict[str, object] | None = None,
    wide_calls: int = 0,
    try_line: int = 0,
) -> Finding:
    """`wide_calls`: the statements with calls of the handler's try when it guards more than one
    (shown as an annotation of the finding; 0 otherwise); `try_line`: that try's line, kept with the
    annotation (`wide_try_line`) so that a reader (the precision benchmark) can tell which try it is."""
    end = handler.end_lineno or handler.lineno
    if wide_calls:
        extra = {**(extra or {}), "wide_calls": wide_calls, "wide_try_line": try_line}
    return Finding(
        rule=rule,
        severity=severity,
        path=ctx.path,
        line_start=handler.lineno,
        line_end=end,
        message_id=message_id,
        params=params,
        extra=extra or {},
        qualname=ctx.qualname(handler.lineno),
        details=details,
    )


def _teardown(
    ctx: FileContext,
    handler: ast.ExceptHandler,
    teardown_tries: frozenset[int] = frozenset(),
    node: ast.AST | None = None,
) -> bool:
    """Teardown or diagnostics code: the try stands in a `finally:` clause, in `__del__`/`__exit__`, or
    in a function the file registers to run at exit or on a signal (`teardown_tries`, see
    `_teardown_tries`), or a word of the file path or the enclosing name is in `_DIAGNOSTIC_WORDS`."""
    if node is not None and id(node) in teardown_tries:
        return True
    where = ctx.qualname(handler.lineno)
    words = {word.lower() for word in _WORD_SPLIT.split(f"{ctx.path.removesuffix('.py')}/{where}") if word}
    return bool(words & _DIAGNOSTIC_WORDS)


def _hook(expr: ast.expr) -> int | None:
    """The callback's argument position when `expr` is `atexit.register`, `signal.signal` or
    `weakref.finalize` (written with its module), else None."""
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
        return _EXIT_HOOKS.get((expr.value.id, expr.attr))
    return None


def _registered_callbacks(tree: ast.AST) -> set[str]:
    """Simple names of the functions the file hands to `atexit.register` (called or as a
    decorator), `signal.signal` or `weakref.finalize`, directly or as the one call of a lambda
    handed over: they run while the program exits or is being stopped."""
    out: set[str] = set()
    for node in pysource.nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any(_hook(d) is not None for d in node.decorator_list):
                out.add(node.name)
            continue
        if not isinstance(node, ast.Call):
            continue
        position = _hook(node.func)
        args = [*node.args, *(k.value for k in node.keywords)]
        if position is None or len(args) <= position:
            continue
        arg = args[position]
        if isinstance(arg, ast.Lambda) and isinstance(arg.body, ast.Call):
            arg = arg.body.func  # `atexit.register(lambda *args: on_quit())`: the lambda only calls it
        if isinstance(arg, ast.Name):
            out.add(arg.id)
        elif isinstance(arg, ast.Attribute):
            out.add(arg.attr)
    return out


def _teardown_tries(tree: ast.AST, callbacks: set[str] | None = None) -> frozenset[int]:
    """ids of the try statements that run on the way out: inside a `finally:` clause, in a
    `__del__`/`__exit__`/`__aexit__` method, in a function `_registered_callbacks` names
    (`callbacks`: those of the file when `tree` is a part of it; by default `tree`'s own), or (round
    20) before the unconditional `raise` that ends an `except` handler: clean-up on an error path
    that raises right after (`_raising_handler_cleanup`), or (round 27) in a function whose last
    statement ends the process with a failing status written as a number (`os._exit(1)`,
    `sys.exit(2)`: `_exits_failed`): what runs before it is on the process's way out, and the exit
    status reports the failure whatever a best-effort step before it does."""
    found: set[int] = set()
    callbacks = _registered_callbacks(tree) if callbacks is None else callbacks
    for node in pysource.statements(tree):
        scopes: list[ast.stmt] = []
        if isinstance(node, (ast.Try, ast.TryStar)):
            scopes = list(node.finalbody) + _raising_handler_cleanup(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
            node.name in _EXIT_METHODS or node.name in callbacks
        ):
            scopes = list(node.body)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _exits_failed(node.body[-1]):
            scopes = list(node.body[:-1])
        for scope in scopes:
            found.update(
                id(sub) for sub in (scope, *pysource.statements(scope)) if isinstance(sub, (ast.Try, ast.TryStar))
            )
    return frozenset(found)


def _exits_failed(stmt: ast.stmt) -> bool:
    """`stmt` ends the process with a failing status written as an integer other than 0
    (`os._exit(1)`, `sys.exit(2)`; round 27): `sys.exit(main())` says nothing of the outcome."""
    if not _ends_process_failed(stmt):
        return False
    assert isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
    status = stmt.value.args[0] if stmt.value.args else None
    return isinstance(status, ast.Constant) and type(status.value) is int and status.value != 0


def _raising_handler_cleanup(node: ast.Try | ast.TryStar) -> list[ast.stmt]:
    """The statements of `node`'s handlers that run before a `raise` standing last in the handler's
    own body (`except TimeoutError: <remove what was created>; raise TimeoutError(...)`): the error
    path raises right after them, so a failure of that clean-up must not replace the error being
    raised, as in a `finally:` clause. A handler that may leave otherwise (its last statement is no
    `raise`), or that returns before it, gives none: its clean-up's failure could be the only trace
    of a problem."""
    found: list[ast.stmt] = []
    for handler in node.handlers:
        if not handler.body or not isinstance(handler.body[-1], ast.Raise):
            continue
        cleanup = handler.body[:-1]
        if not any(isinstance(sub, ast.Return) for stmt in cleanup for sub in pysource.walk(stmt)):
            found.extend(cleanup)
    return found


def _broad(
    ctx: FileContext,
    handler: ast.ExceptHandler,
    label: str,
    ruff_note: str,
    *,
    boundary: bool,
    teardown: bool,
    exit_path: bool,
    wide_calls: int,
    try_line: int,
    try_body: list[ast.stmt],
    after: ast.stmt | None,
    diagnostic_procedure: str | None,
    unharmful: tuple[str, dict[str, object]] | None = None,
    replaced: str | None = None,
    existing_route: Callable[[], bool] = lambda: False,
    base_route_catching_exit: Callable[[], bool] = lambda: False,
    nit: Callable[[], tuple[str, dict[str, object]] | None] = lambda: None,
    failure_status: bool = False,
    background: str | None = None,
) -> Finding | None:
    """The finding for a bare / `Exception` / `BaseException` handler (see the module docstring);
    `boundary`: the handler ends a unit of work and reports its error; `teardown`: `_teardown`;
    `exit_path`: the try runs on the way out (`_teardown_tries`); `wide_calls`, `try_line`: the
    annotation `_handler_finding` shows; `try_body`: the body of the handler's try; `after`: the statement
    after it (`_following`); `diagnostic_procedure`: the function's name when the try's failure can
    only cost a diagnostic (`_diagnostic_procedures`); `unharmful`: the message id and parameters of
    the P3 a swallow gets when its outcome reaches no result (`_unharmful`); `replaced`: the parameter
    the handler rebinds to a constant and the function reads after the try (`replaced_argument`);
    `existing_route`: whether the handler falls back to a route the code already had
    (`_existing_route`), asked only of a swallow no P3 class takes; `base_route_catching_exit`:
    whether a bare or `BaseException` handler falls back to the base's code
    (`previous_behaviour.base_code_catching_exit`), asked after it; `nit`: the message id and
    parameters of the P3 a swallow with no comment gets as a probe's answer, a dropped metrics
    write, an attempt by name or an optional package's route (`_probe_nit`), asked last;
    `failure_status`: the handler records the unit as failed without the error (`_failure_status`);
    `background`: the name of the function holding the handler when the file starts it on another
    thread with its handle dropped (`background_work.in_dropped_start`)."""
    if reraises_same(handler):
        # the same exception goes on, `KeyboardInterrupt` included, after the handler's cleanup
        # (round 11: a bare `except:` here is `except BaseException: ...; raise`, nothing is lost)
        return None
    params: dict[str, object] = {"label": label}
    noqa = _noqa(ctx, handler)
    if noqa is not None and noqa[1]:
        params["codes"] = noqa[0]
        extra = {"reason": noqa[1]}
        return _handler_finding(
            ctx, handler, "broad-except", Severity.P3, "broad-except.noqa-reason", params, ruff_note, extra
        )
    if _rebuilds(handler):
        return _handler_finding(ctx, handler, "broad-except", Severity.P3, "broad-except.rebuilds", params, ruff_note)
    target = _conversion(handler) or _falls_into_raise(handler, after)
    if target is not None:
        sites = _fallback_sites(ctx, target, handler)
        if not sites and _FALLBACK_SIGNAL.search(target.rsplit(".", 1)[-1]):
            # the type is by its name the "not supported here" signal that callers catch to fall
            # back, whether or not they are in this revision (a dispatch layer, the library's users)
            params["target"] = target
            return _handler_finding(
                ctx, handler, "broad-except", Severity.P2, "broad-except.converts-to-signal", params, ruff_note
            )
        if not sites:
            # nothing here catches the new type: it reaches the caller, chained to the original
            if handler.type is None:
                return _handler_finding(
                    ctx, handler, "broad-except", Severity.P3, "broad-except.bare-reraises", {}, ruff_note
                )
            return None
        params["target"] = target
        shown = ", ".join(f"{site.path}:{site.line}" for site in sites[:SHOWN_SUBCLASSES])
        extra = {"caught_at": shown, "more": len(sites) - min(len(sites), SHOWN_SUBCLASSES)}
        return _handler_finding(
            ctx, handler, "broad-except", Severity.P0, "broad-except.converts", params, ruff_note, extra
        )
    if boundary:
        return None
    record = _error_record(handler)
    if record is not None:
        # the failure is handed on with its message (FastVideo's worker messages, round 14)
        if not record:
            return None
        return _handler_finding(
            ctx, handler, "broad-except", Severity.P3, "broad-except.error-record", params, ruff_note
        )
    if failure_status:
        # the fallback records the unit as failed, without the error (round 25)
        return _handler_finding(
            ctx, handler, "broad-except", Severity.P3, "broad-except.failure-status", params, ruff_note
        )
    if exit_path and all(_logs_or_leaves(stmt) for stmt in handler.body):
        # cleanup on the way out: raising here would mask the error being handled or stop the
        # rest of the teardown
        return None
    # a rank's report is its own: a collective's peers never see it and go on without it (round 27)
    if _reported_fallback(handler, try_body, after) and collective_call(try_body) is None:
        if background is not None and all(_logs_or_leaves(stmt) for stmt in handler.body):
            # only a log learns that work started with its handle dropped failed (round 27)
            params["function"] = background
            end = end_on_error_channel(ctx.tree, handler, after)
            if end is not None:
                params["end"] = end  # a new finding where the change gave the channel its errors
            return _handler_finding(
                ctx, handler, "broad-except", Severity.P2, "broad-except.background-report", params, ruff_note
            )
        if replaced is None:
            return None
        # the stated default replaces what the caller passed (round 13)
        params["argument"] = replaced
        return _handler_finding(
            ctx, handler, "broad-except", Severity.P2, "broad-except.replaces-argument", params, ruff_note
        )
    if diagnostic_procedure is not None and all(_logs_or_leaves(stmt) for stmt in handler.body):
        params["where"] = diagnostic_procedure
        return _handler_finding(
            ctx, handler, "broad-except", Severity.P3, "broad-except.skips-diagnostics", params, ruff_note
        )
    if _logs_and_continues(handler) and teardown:
        params["where"] = ctx.qualname(handler.lineno) or ctx.path
        return _handler_finding(
            ctx,
            handler,
            "broad-except",
            Severity.P3,
            "broad-except.diagnostics",
            params,
            ruff_note,
            wide_calls=wide_calls,
            try_line=try_line,
        )
    if unharmful is not None:
        return _handler_finding(
            ctx, handler, "broad-except", Severity.P3, unharmful[0], {**params, **unharmful[1]}, ruff_note
        )
    if existing_route():
        # the worst case is what the code did before the change, or does anyway (round 16)
        return None
    if base_route_catching_exit():
        # the base's code as the fallback, but Ctrl+C and sys.exit() take it too (round 21)
        return _handler_finding(
            ctx, handler, "broad-except", Severity.P3, "broad-except.base-fallback-catches-exit", params, ruff_note
        )
    jump = raises_into_handler(try_body, handler)
    if jump is not None:
        # the try's own raise lands here on purpose: a branch stated in code (round 20); the claim
        # stays the swallow's P0 for the injection experiment, unconfirmed it is a P3
        extra = {"by_assert": jump == "assert", "bare": handler.type is None}
        finding = _handler_finding(
            ctx, handler, "broad-except", Severity.P0, "broad-except.raises-into-handler", params, ruff_note, extra
        )
        return dataclasses.replace(finding, unconfirmed_cap=Severity.P3)
    if reported_other_path(handler, try_body):
        # the failure is shown and the result computed another way, or the input handed back (round
        # 19): the claim stays the swallow's P0 for the injection experiment; unconfirmed it is a P3
        finding = _handler_finding(
            ctx,
            handler,
            "broad-except",
            Severity.P0,
            "broad-except.reported-other-path",
            params,
            ruff_note,
            {"drops_exception": not report_names_caught(handler)},
        )
        return dataclasses.replace(finding, unconfirmed_cap=Severity.P3)
    comment = _handler_comment(ctx, handler)
    if _BEST_EFFORT.search(comment) and all(_value_at_hand(stmt) for stmt in handler.body):
        # a best-effort side channel, said in the handler as the docstring class says it (round 19)
        return None
    shown = nit()
    if shown is not None:
        # a probe's "no", a dropped metrics write, an attempt, an optional route: a nit (round 24)
        return _handler_finding(ctx, handler, "broad-except", Severity.P3, shown[0], {**params, **shown[1]}, ruff_note)
    if comment:
        return _handler_finding(
            ctx,
            handler,
            "broad-except",
            Severity.P2,
            "broad-except.documented",
            params,
            ruff_note,
            {"reason": comment},
            wide_calls=wide_calls,
            try_line=try_line,
        )
    route = decides_route(handler, after)
    if route is not None:
        # the same swallow, worded by its harm: the constant picks the branch after the try (round 25)
        params["name"], params["line"] = route
    collective = collective_call(try_body)
    # a collective in the try names its harm (ranks that hang), as a route does: no nit then
    one_operation = route is None and collective is None and _operations(try_body) <= 1
    shown = route is None and collective is None and not one_operation and _shows_error(handler)
    finding = _handler_finding(
        ctx,
        handler,
        "broad-except",
        Severity.P0,
        _swallow_message(route is not None, one_operation, shown),
        params,
        ruff_note,
        {"collective": collective} if collective is not None else None,
        wide_calls=wide_calls,
        try_line=try_line,
    )
    if one_operation or shown:
        # round 26: the claim stays the swallow's P0 for the injection experiment; unconfirmed, a
        # catch-all around one operation is a P3 (`_swallow_message`); round 29: so is one over a
        # wider try that shows the error it takes (`_shows_error`)
        return dataclasses.replace(finding, unconfirmed_cap=Severity.P3)
    return finding


def _swallow_message(decides_route: bool, one_operation: bool, shown: bool = False) -> str:
    """The message id of a plain swallow (`_broad`'s last case): `broad-except.decides-route` when
    its constant picks the branch after the try (round 25), (round 26)
    `broad-except.swallows-one-operation` when its try guards one operation (`_operations`), (round
    29) `broad-except.swallows-reported` when its wider try's handler shows the error it takes
    (`_shows_error`), both of which `_broad` caps at P3 while unconfirmed (the same fingerprint,
    `findings.SAME_FINDING`), else `broad-except.swallows`. A try that guards one operation had its
    fallback written for that operation's failure: what is left is to catch the exception that
    failure raises, a nit; in a wider try every other statement's failure, a bug included, takes the
    fallback too. The width is a proxy for the harm, which no syntax shows: a one-operation fallback
    used as data or deciding a route stays a real problem, shown at P3 (docs/reviewbot.md, round 26).
    A wider try whose handler shows the error is not silent: what the pattern alone shows is the
    clause's width again, and whether the fallback harms depends on what the program does next
    (docs/reviewbot.md, round 29)."""
    if decides_route:
        return "broad-except.decides-route"
    if one_operation:
        return "broad-except.swallows-one-operation"
    return "broad-except.swallows-reported" if shown else "broad-except.swallows"


# calls that read the caught exception's type, or convert it, without handing it on (round 29)
_TYPE_TESTS = frozenset({"isinstance", "issubclass", "type", "hasattr", "getattr"})
_CONVERSIONS = frozenset({"str", "repr", "format"})
# the words of a name for errors: `_Error(...)`, `error_msgs.append(...)`, `metrics.error_msg = ...`,
# `record_failure(...)` (round 29)
_ERROR_WORDS = frozenset({"err", "error", "errors", "fail", "failed", "failure", "failures", "exception", "exceptions"})
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")


def _names_error(name: str) -> bool:
    """`name`, split into its snake_case and CamelCase words, has a word for errors (`_ERROR_WORDS`)."""
    return any(word.lower() in _ERROR_WORDS for word in _WORD.findall(name))


def _unconditional(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The simple statements of `body` that run whenever it runs to its end: those of a loop, a
    `with` or a try are read, those under an `if` (and a nested function or class) are not."""
    for stmt in body:
        if isinstance(stmt, (ast.If, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        blocks = list(statement_blocks(stmt))
        if not blocks:
            yield stmt
            continue
        for block in blocks:
            yield from _unconditional(block)


def _itself(node: ast.AST, name: str | None) -> bool:
    """`node` holds the caught exception `name` itself, outside any call (`e`, `(None, e)`), not a
    value built from it (`str(e)`, `f"{e}"`)."""
    if isinstance(node, ast.Name):
        return node.id == name
    if isinstance(node, (ast.Call, ast.JoinedStr)):
        return False
    return any(_itself(sub, name) for sub in ast.iter_child_nodes(node))


def _last_name(node: ast.expr) -> str:
    if isinstance(node, ast.Subscript):
        return _last_name(node.value)
    return last_name(node)


def _error_named(call: ast.Call) -> bool:
    """The call, or the object whose method it is, is named for errors (`_names_error`)."""
    receiver = _last_name(call.func.value) if isinstance(call.func, ast.Attribute) else ""
    return _names_error(callee(call)) or _names_error(receiver)


def _shows_error(handler: ast.ExceptHandler) -> bool:
    """Round 29: the handler shows the failure it takes, in a statement that runs whenever it runs
    (`_unconditional`: not under an `if`): a report at warning level or above, or a print
    (`shown_level`), that names the caught exception or carries its traceback
    (`logger.exception`, `exc_info=`), or `traceback.print_exc()`; or the error handed on (`_hands_on`,
    and `return e`, an exception stored in an attribute or an item, or its text stored in one named
    for errors: `metrics.error_msg = str(e)`). A `raise` is not read here (a handler that raises is
    another class). A report at info or debug level, one that drops the error, and the error's text
    passed on as an ordinary value (`q.put(Item(str(e)))`) do not show it."""
    name = handler.name
    for stmt in _unconditional(handler.body):
        if isinstance(stmt, ast.Raise):
            continue
        if isinstance(stmt, ast.Return):
            if stmt.value is not None and _itself(stmt.value, name):
                return True
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            call = stmt.value
            if shows_caught(call, name):
                return True
            if shown_level(call) is not None:
                continue
        if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                if not isinstance(target, (ast.Attribute, ast.Subscript)):
                    continue
                if _itself(stmt.value, name) or (_names_error(_last_name(target)) and reads_name(stmt.value, name)):
                    return True
        if _hands_on(stmt, name):
            return True
    return False


def _hands_on(node: ast.AST, name: str | None) -> bool:
    """A call in `node`, outside reports, type tests and conversions, that is passed the caught
    exception `name` itself (`future.set_exception(e)`, `retry.increment(error=e)`) or, when the call
    or its receiver is named for errors (`_error_named`), a value built from it
    (`q.put(_Error(str(e)))`, `error_msgs.append(f"...{e}")`)."""
    for sub in ast.iter_child_nodes(node):
        if isinstance(sub, ast.Call):
            if shown_level(sub) is not None or callee(sub) in _TYPE_TESTS:
                continue
            if callee(sub) not in _CONVERSIONS:
                arguments = [*sub.args, *(k.value for k in sub.keywords)]
                if any(_itself(argument, name) for argument in arguments):
                    return True
                if _error_named(sub) and any(reads_name(argument, name) for argument in arguments):
                    return True
        if _hands_on(sub, name):
            return True
    return False


def _operations(body: list[ast.stmt]) -> int:
    """The operations of a try body (round 26): its imports and its simple statements with a call
    other than a report (`is_logging_call`: logging, `print`, a warning), the statements of a
    compound one (a loop, `if`, `with`, a nested try) counted one by one, and a `with` whose context
    manager is a call (`with torch.autocast(...)`) as one more (a loop's or an `if`'s header is
    not: `for name, value in options.items()`); a nested function or class counts as none. Unlike
    `wide_calls` (the annotation), a try around one `while` loop of several calls, or around a
    logged call, is read as what it guards."""
    count = 0
    for stmt in body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            count += 1
            continue
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        blocks = list(statement_blocks(stmt))
        if not blocks:
            calls = (sub for sub in pysource.walk(stmt) if isinstance(sub, ast.Call))
            count += 1 if any(not is_logging_call(call) for call in calls) else 0
            continue
        if isinstance(stmt, (ast.With, ast.AsyncWith)) and any(
            isinstance(i.context_expr, ast.Call) for i in stmt.items
        ):
            count += 1
        count += sum(_operations(block) for block in blocks)
    return count


class _FileFacts:
    """The facts of one file that `check` reads for some handlers only, each computed on first use.

    `tries`: the try statements `check` reads. When each stands in a module-level function or class,
    the facts that only depend on the statements around a try (its block, its enclosing functions
    and loops) are read from those definitions alone (`_local`, a module made of them, the file's
    own nodes shared; in a class, the method holding the try, through nested classes): the same
    answers for those tries, without reading the rest of a large file. A try elsewhere at module
    level makes the whole module the place to read them."""

    def __init__(self, tree: ast.Module, tries: list[ast.Try | ast.TryStar]) -> None:
        self._tree = tree
        self.display = _DisplayOnly(tree)
        units: dict[int, ast.stmt] = {}
        for node in tries:
            unit = _holding(tree.body, node.lineno)
            if not isinstance(unit, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                units = {}
                break
            while isinstance(unit, ast.ClassDef):
                inner = _holding(unit.body, node.lineno)
                if not isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    break  # a try in the class body itself: read with the statements before it
                unit = inner
            units[id(unit)] = unit
        body = sorted(units.values(), key=lambda unit: unit.lineno)
        self._local = ast.Module(body=body, type_ignores=[]) if units else tree

    @property
    def tree(self) -> ast.Module:
        """The whole file's tree."""
        return self._tree

    @functools.cached_property
    def alternatives(self) -> frozenset[int]:
        return _alternatives_tries(self._local)

    @functools.cached_property
    def following(self) -> dict[int, ast.stmt | None]:
        return _following(self._local)

    @functools.cached_property
    def exit_tries(self) -> frozenset[int]:
        return _teardown_tries(self._local, _registered_callbacks(self._tree))

    @functools.cached_property
    def documented(self) -> frozenset[int]:
        return _docstring_fallbacks(self._local)

    @functools.cached_property
    def import_tries(self) -> frozenset[int]:
        return _module_level_tries(self._tree)

    @functools.cached_property
    def dropped_starts(self) -> frozenset[str]:
        return dropped_starts(self._tree)

    @functools.cached_property
    def report_only(self) -> dict[str, str]:
        return report_only_results(self._tree)

    @functools.cached_property
    def diagnostic_tries(self) -> dict[int, str]:
        return _diagnostic_procedures(self._local)

    @functools.cached_property
    def _unbound(self) -> dict[int, list[UnboundRead]]:
        return unbound_reads(self._local)

    def unbound_at(self, node: ast.Try | ast.TryStar | ast.ExceptHandler) -> list[UnboundRead]:
        """`unbound_reads` of the file for the try or the handler `node`."""
        return self._unbound.get(id(node), [])


def _holding(body: list[ast.stmt], line: int) -> ast.stmt:
    """The statement of `body` (a statement list in source order) whose lines hold `line`."""
    return body[bisect.bisect_right([stmt.lineno for stmt in body], line) - 1]


def _is_filter(handler: ast.ExceptHandler, node: ast.Try | ast.TryStar, in_loop: bool, facts: _FileFacts) -> bool:
    """A handler that re-raises what it does not recognise, a bounded retry, or one of alternatives tried in turn."""
    return (
        _filters(handler)
        or _bounded_retry(handler, in_loop)
        or (_alternatives(handler) and id(node) in facts.alternatives)
        or unrolled_alternatives(facts.tree, node, handler)
    )


def _known_answer(
    ctx: FileContext,
    node: ast.Try | ast.TryStar,
    handler: ast.ExceptHandler,
    imports: dict[str, str],
    after: ast.stmt | None,
) -> bool:
    """The handler answers with what the function answers when nothing fails, and only library code
    runs in the try: it only logs or passes, then returns a constant (or falls through to a `return
    <constant>` right after the try), and the same constant is already one of the try's own answers
    (a `return` of it in the try body, or the try body's end falling through to that same return:
    `if cuda_version is not None: return int(major) == 12` then `return False`); every call of the
    try body goes to a library outside the repository (`runs_no_repository_code`). Callers already
    handle that answer, and no programmer error of the repository can be what is swallowed
    (round 15's CUDA-12 probe in flash-attention, round 14's `nvidia-smi` probe in AITemplate).
    Near misses: another constant than the try's own, a try that calls the repository's code."""
    *logs, last = handler.body
    if not all(_logs_or_leaves(stmt) and not isinstance(stmt, ast.Return) for stmt in logs):
        return False
    falls = isinstance(last, ast.Pass) or (isinstance(last, ast.Expr) and is_logging_call(last.value))
    answer = last if isinstance(last, ast.Return) else after if falls else None
    if not (isinstance(answer, ast.Return) and isinstance(answer.value, ast.Constant)):
        return False
    constant = answer.value.value
    own = any(
        isinstance(sub, ast.Return) and isinstance(sub.value, ast.Constant) and sub.value.value == constant
        for stmt in node.body
        for sub in pysource.walk(stmt)
    )
    completes = not isinstance(node.body[-1], (ast.Return, ast.Raise))
    if not (own or (answer is after and completes)):
        return False
    return runs_no_repository_code(ctx, node.body, imports)


def _is_probe(
    ctx: FileContext,
    node: ast.Try | ast.TryStar,
    handler: ast.ExceptHandler,
    imports: dict[str, str],
    facts: _FileFacts,
) -> bool:
    """One of the expected-failure shapes the rules leave alone; a noqa comment with a reason stays
    the respected note the injection experiment may still check."""
    return (
        _guarded_probe(ctx, node, handler, facts.following.get(id(node)))
        or _known_answer(ctx, node, handler, imports, facts.following.get(id(node)))
        or _package_probe(node, handler, imports)
        or _version_probe(node, handler, imports)
        or id(handler) in facts.documented
        or _optional_dependency(ctx, node, handler)
        or _reported_optional_import(ctx, node, handler)
        or _deferred_import_failure(ctx.tree, node, handler)
        or _optional_rewrap(node, handler, id(node) in facts.import_tries)
        or _discards_output(ctx, handler, imports)
        or _display_placeholder(ctx, handler, facts.display)
        or cache_miss(ctx.tree, node, handler)
        or undoes_own_registration(ctx.tree, node, handler)
        or warned_flag_probe(ctx.tree, node, handler, facts.following.get(id(node)))
        or import_for_else_only(ctx.tree, node, handler)
        or older_query(ctx.tree, node, handler)
    ) and not _noqa_reason(ctx, handler)


def _converts(ctx: FileContext, handler: ast.ExceptHandler) -> bool:
    return _helper_raises(ctx, handler) or _hands_error_on(ctx, handler) or _queues_error(handler)


def _unharmful(
    ctx: FileContext,
    node: ast.Try | ast.TryStar,
    handler: ast.ExceptHandler,
    report_only: dict[str, str],
    imports: dict[str, str],
) -> tuple[str, dict[str, object]] | None:
    """The P3 message id and parameters for a swallow whose outcome reaches no result the user
    receives (round 12, `reviewbot.rules.handler_reach`): nothing substituted and the loss announced or
    only a third-party import's side effect; or a constant substituted in a private function whose
    result only a report procedure uses; or (round 24) a result nothing reads
    (`reviewbot.rules.unread_result`); or, shown with its traceback, an element its filter drops
    (`reviewbot.rules.filtered_out`); or a creation whose failure a later use of the created name
    shows (`reviewbot.rules.created_then_used`); or a guessed default the code checks right after
    the try (`reviewbot.rules.checked_default`); or (round 25) a call of a function of this file
    that handles its own expected failures (`reviewbot.rules.handled_callee`). None when the
    outcome may reach a result."""
    lost = nothing_substituted(ctx, node, handler, imports)
    if lost == "announced":
        return "broad-except.announced-skip", {}
    if lost is not None:
        return "broad-except.side-effect-import", {}
    function = enclosing_function(ctx.tree, node)
    if function in report_only and substitutes_constant(handler):
        return "broad-except.report-only", {"where": function, "report": report_only[function]}
    if unread_result(ctx.tree, node, handler):
        return "broad-except.unread-result", {}
    if filtered_out(ctx.tree, node, handler):
        return "broad-except.filtered-out", {}
    created = used_after_create(ctx.tree, node, handler)
    if created is not None:
        return "broad-except.used-after-create", {"name": created}
    guessed = checked_default(ctx.tree, node, handler)
    if guessed is not None:
        return "broad-except.checked-default", {"name": guessed}
    handled = handled_callee(ctx.tree, node, _NEUTRAL_BUILTINS)
    if handled is not None:
        return "broad-except.handled-callee", {"callee": handled}
    return None


def _probe_nit(
    ctx: FileContext, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler
) -> tuple[str, dict[str, object]] | None:
    """The P3 message id and parameters for a swallow that is a yes/no probe answering "no"
    (`predicate_probe.negative_answer`), a shown and dropped metrics write
    (`metrics_write.metrics_write`), a logged failure of a procedure that by its name only tries
    (`named_attempt.named_attempt`) or an optional package's route falling through to the function's
    other route (`optional_route.optional_route`), round 24; None otherwise."""
    predicate = negative_answer(ctx.tree, node, handler)
    if predicate is not None:
        return "broad-except.predicate-probe", {"predicate": predicate}
    write = metrics_write(node, handler)
    if write is not None:
        return "broad-except.metrics-write", {"write": write}
    attempt = named_attempt(ctx.tree, node, handler)
    if attempt is not None:
        return "broad-except.named-attempt", {"where": attempt}
    package = optional_route(ctx, node, handler)
    if package is not None:
        return "broad-except.optional-route", {"package": package}
    return None


def check(ctx: FileContext) -> list[Finding]:
    """The findings on the handlers of the file's try statements, of those `ctx.focus` can report
    (a finding stands on its handler's lines, inside its try's). The file's other facts
    (`_FileFacts`) are read on the first handler that needs them: none when no try is in focus, the
    teardown and diagnostic facts only for a broad handler no shape exempts, the display-only
    functions only for a handler that returns a constant."""
    tries = [
        node
        for node in pysource.nodes(ctx.tree)
        if isinstance(node, (ast.Try, ast.TryStar))
        and node.handlers
        and ctx.focus(node.lineno, node.end_lineno or node.lineno)
    ]
    if not tries:
        return []
    ruff_lines = {(hit.code, hit.line) for hit in ctx.ruff}
    findings: list[Finding] = []
    loop_tries = _loop_tries(ctx.tree)
    turn_ending = _turn_ending_tries(ctx.tree)
    imports = _import_map(ctx)
    facts = _FileFacts(ctx.tree, tries)
    moved = moved_handlers(ctx, tries)
    for node in tries:
        calls = _call_statements(node.body)
        wide_calls = len(calls) if len(calls) > 1 else 0
        library_calls = stdlib_call_count(node.body, imports, BUILTINS_AT_HAND)
        confined = library_calls is not None
        in_loop = id(node) in loop_tries
        for i, handler in enumerate(node.handlers):
            if handler_key(node, handler) in moved:
                # the same try and handler stand in the base revision: moved, not added (round 12)
                continue
            names = caught_names(handler)
            label = "except:" if names is None else f"except {ast.unparse(handler.type) if handler.type else ''}"
            ruff_note = ""
            if ("E722", handler.lineno) in ruff_lines:
                ruff_note = "ruff E722"
            elif handler.type is not None and ("BLE001", handler.type.lineno) in ruff_lines:
                ruff_note = "ruff BLE001"
            if raise_made_conditional(ctx, node, handler):
                # the base raised on every entry; now some entries pass with nothing done (round 24)
                findings.append(
                    _handler_finding(
                        ctx,
                        handler,
                        "broad-except",
                        Severity.P2,
                        "broad-except.raise-made-conditional",
                        {"label": label},
                    )
                )
                continue
            opened = fails_open(ctx.tree, node, handler)
            if opened is not None:
                # the check's answer on failure lets a removal run (round 25), whatever the width
                params = {"label": label, "check": opened[0], "removal": opened[1]}
                findings.append(
                    _handler_finding(ctx, handler, "broad-except", Severity.P2, "broad-except.fails-open", params)
                )
                continue
            if names is None or BROAD & set(names):
                read = left_unbound(handler, functools.partial(facts.unbound_at, node))
                if read is not None:
                    params = {"label": label, "name": read.name, "line": read.line}
                    findings.append(
                        _handler_finding(
                            ctx, handler, "broad-except", Severity.P2, "broad-except.unbound", params, ruff_note
                        )
                    )
                    continue
                inside = facts.unbound_at(handler)
                if inside:
                    # before any exemption: a handler that re-raises or logs raises this instead
                    params = {"label": label, "name": inside[0].name, "line": inside[0].line}
                    findings.append(
                        _handler_finding(
                            ctx, handler, "broad-except", Severity.P2, "broad-except.handler-unbound", params, ruff_note
                        )
                    )
                    continue
                skipped = retry_error_skips_handlers(ctx.tree, imports, node, i)
                if skipped is not None:
                    # the retry decorator's own error passes the narrow handlers it was for (round 27)
                    params = {"label": label, "callee": skipped[0], "handlers": skipped[1]}
                    findings.append(
                        _handler_finding(
                            ctx, handler, "broad-except", Severity.P2, "broad-except.retry-error-skips-handlers", params
                        )
                    )
                    continue
                if _after_catch_all(node, i) and not reraises_same(handler):
                    # only what `except Exception` lets through reaches it: exits and interrupts (round 27)
                    findings.append(
                        _handler_finding(
                            ctx, handler, "broad-except", Severity.P3, "broad-except.exits-only", {"label": label}
                        )
                    )
                    continue
                raw = unconverted_element(ctx.tree, node, handler)
                if raw is not None:
                    # the element keeps its raw part next to converted ones, reported or not (round 27)
                    findings.append(
                        _handler_finding(
                            ctx,
                            handler,
                            "broad-except",
                            Severity.P2,
                            "broad-except.element-left-unconverted",
                            {"label": label, "part": raw},
                            ruff_note,
                        )
                    )
                    continue
                narrow = widened_handler(node, handler)
                if narrow is not None and not reraises_same(handler):
                    if fallback_at_base(ctx, node, handler):
                        # every error of this try took this value at the base: the change split the
                        # narrow case off or changed the report (round 21)
                        continue
                    params = {"label": label, "narrow": narrow}
                    unread = discarded_return(ctx.tree, handler)
                    if unread is not None:
                        # no caller in the file reads the value, and the report names the error (round 25)
                        findings.append(
                            _handler_finding(
                                ctx,
                                handler,
                                "broad-except",
                                Severity.P3,
                                "broad-except.widens-discarded",
                                {**params, "where": unread},
                                ruff_note,
                            )
                        )
                        continue
                    # the fallback was written for the narrow failure; every other error now reads as it
                    findings.append(
                        _handler_finding(
                            ctx, handler, "broad-except", Severity.P0, "broad-except.widens-fallback", params, ruff_note
                        )
                    )
                    continue
                passed_over = silent_filter(handler)
                if passed_over is not None:
                    # a message filter whose kept branch shows nothing (round 22)
                    findings.append(
                        _handler_finding(
                            ctx,
                            handler,
                            "broad-except",
                            Severity.P2,
                            "broad-except.silent-filter",
                            {"label": label, "text": passed_over},
                            ruff_note,
                        )
                    )
                    continue
                if (
                    _is_filter(handler, node, in_loop, facts)
                    or _is_probe(ctx, node, handler, imports, facts)
                    or _converts(ctx, handler)
                    or _passes_error_on(ctx, node, handler)
                ):
                    continue
                shim = version_shim(ctx.path, node, handler)
                if shim is not None:
                    # the same names bound to the author's stand-ins for another version (round 25)
                    if names is None or "BaseException" in names:
                        params = {"label": label, "names": shim}
                        findings.append(
                            _handler_finding(
                                ctx,
                                handler,
                                "broad-except",
                                Severity.P3,
                                "broad-except.shim-catches-exit",
                                params,
                                ruff_note,
                            )
                        )
                    continue
                if (
                    constant_data(node, handler)
                    and _error_record(handler) is None
                    and not _failure_status(ctx.tree, node, handler)
                    and not reraises_same(handler)
                ):
                    if fallback_at_base(ctx, node, handler):
                        continue  # the same batch for every error of the same try at the base (round 21)
                    if replaced_marker(ctx.tree, node, handler):
                        continue  # `None` markers the next source fills or an error ends (round 24)
                    if callers_skip_value(ctx.tree, node, handler):
                        continue  # what every caller has when it skips the call (round 25)
                    # an empty or constant batch flows on as the result, reported or not (round 19)
                    findings.append(
                        _handler_finding(
                            ctx,
                            handler,
                            "broad-except",
                            Severity.P0,
                            "broad-except.constant-data",
                            {"label": label},
                            ruff_note,
                        )
                    )
                    continue
                if confined and not reraises_same(handler) and not _noqa_reason(ctx, handler):
                    if names is None or "BaseException" in names:
                        lookup = _object_lookup(node.body, imports) if not library_calls else None
                        findings.append(
                            _handler_finding(
                                ctx,
                                handler,
                                "broad-except",
                                Severity.P3,
                                "broad-except.confined-catches-exit"
                                if lookup is None
                                else "broad-except.lookup-catches-exit",
                                {"label": label} if lookup is None else {"label": label, "attribute": lookup},
                                ruff_note,
                            )
                        )
                    continue
                teardown = _teardown(ctx, handler, facts.exit_tries, node)
                finding = _broad(
                    ctx,
                    handler,
                    label,
                    ruff_note,
                    boundary=_unit_boundary(handler, in_loop, teardown, id(node) in turn_ending),
                    teardown=teardown,
                    exit_path=id(node) in facts.exit_tries,
                    wide_calls=wide_calls,
                    try_line=node.lineno,
                    try_body=node.body,
                    after=facts.following.get(id(node)),
                    diagnostic_procedure=facts.diagnostic_tries.get(id(node)),
                    unharmful=_unharmful(ctx, node, handler, facts.report_only, imports),
                    replaced=replaced_argument(ctx.tree, node, handler),
                    existing_route=functools.partial(_existing_route, ctx, node, handler),
                    base_route_catching_exit=functools.partial(base_code_catching_exit, ctx, node, handler),
                    nit=functools.partial(_probe_nit, ctx, node, handler),
                    failure_status=_failure_status(ctx.tree, node, handler),
                    background=in_dropped_start(ctx.tree, handler, facts.dropped_starts),
                )
                if finding is not None:
                    findings.append(finding)
                continue
            unbound_import = import_left_unbound(ctx.tree, node, handler) if "ImportError" in names else None
            if unbound_import is not None:
                # every other ImportError ends later in a NameError that names neither (round 25)
                params = {"label": label, "name": unbound_import.name, "line": unbound_import.line}
                findings.append(
                    _handler_finding(ctx, handler, "broad-except", Severity.P2, "broad-except.import-unbound", params)
                )
                continue
            stub = noop_stub_called(ctx.tree, node, handler) if "ImportError" in names else None
            if stub is not None:
                # the feature's calls run a stub that does nothing, silently (round 27)
                params = {"label": label, "name": stub[0], "line": stub[1]}
                findings.append(
                    _handler_finding(ctx, handler, "broad-except", Severity.P2, "broad-except.import-noop-stub", params)
                )
                continue
            # the RuntimeError family's filters are `runtime-error-fallback`'s (an OOM test, round 22)
            picked = None if RUNTIME_FAMILY & set(names) else falls_through_unmatched(ctx, node, handler)
            if picked is not None:
                # the handler handles the errors its test matches; the others pass in silence (round 27)
                findings.append(
                    _handler_finding(
                        ctx,
                        handler,
                        "broad-except",
                        Severity.P2,
                        "broad-except.filter-falls-through",
                        {"label": label, "test": picked},
                    )
                )
                continue
            builtin = [n for n in names if n in RUNTIME_FAMILY]
            around_call = bool(calls) and not reraises_same(handler)
            subclasses = _unhandled_subclasses(ctx, node, i, builtin, imports) if builtin and around_call else []
            if subclasses:
                target = _conversion(handler)
                shown = [f"`{c.full_name}` ({c.path}:{c.line})" for c in subclasses[:SHOWN_SUBCLASSES]]
                params: dict[str, object] = {
                    "label": label,
                    "classes": [c.full_name for c in subclasses],
                }
                extra: dict[str, object] = {"shown": ", ".join(shown), "more": len(subclasses) - len(shown)}
                if target is None:
                    message_id = "caught-own-subclass.swallows"
                else:
                    message_id = "caught-own-subclass.converts"
                    params["target"] = target
                findings.append(
                    _handler_finding(ctx, handler, "caught-own-subclass", Severity.P2, message_id, params, extra=extra)
                )
            passed_over = silent_filter(handler) if "RuntimeError" in names else None
            if passed_over is not None:
                # a message filter whose kept branch shows nothing (round 22)
                findings.append(
                    _handler_finding(
                        ctx,
                        handler,
                        "runtime-error-fallback",
                        Severity.P2,
                        "runtime-error-fallback.silent-filter",
                        {"label": label, "text": passed_over},
                    )
                )
                continue
            fallback = (
                "RuntimeError" in names
                and not _raises(handler.body)
                and not (
                    _is_filter(handler, node, in_loop, facts)
                    or _is_probe(ctx, node, handler, imports, facts)
                    or _converts(ctx, handler)
                    or _named_alternative(ctx, node, handler)
                    or _falls_into_raise(handler, facts.following.get(id(node))) is not None
                    or _passes_error_on(ctx, node, handler)
                    or same_call_other_name(node, handler)
                    or _own_runtime_signal(ctx, node, imports)
                )
            )
            torch_reached = ctx.exceptions().torch_imported or names_device_error(handler)
            if fallback and not _stdlib_only(node.body, imports) and torch_reached:
                oom = _oom_reraised(node, i)
                alternative = implementation_alternative(node, handler)
                if not oom and alternative is not None:
                    findings.append(
                        _handler_finding(
                            ctx,
                            handler,
                            "runtime-error-fallback",
                            Severity.P3,
                            "runtime-error-fallback.implementation-alternative",
                            {"label": label, "alternative": alternative},
                        )
                    )
                elif not oom and cpu_retry(node, handler):
                    # the same computation again on the CPU, its failure propagated (round 22)
                    findings.append(
                        _handler_finding(
                            ctx,
                            handler,
                            "runtime-error-fallback",
                            Severity.P3,
                            "runtime-error-fallback.cpu-retry",
                            {"label": label},
                        )
                    )
                elif not oom and retried_outside_context(node, handler):
                    # the same statement again outside its context manager, its failure propagated (round 24)
                    findings.append(
                        _handler_finding(
                            ctx,
                            handler,
                            "runtime-error-fallback",
                            Severity.P3,
                            "runtime-error-fallback.context-retry",
                            {"label": label},
                        )
                    )
                elif not oom:
                    findings.append(
                        _handler_finding(
                            ctx,
                            handler,
                            "runtime-error-fallback",
                            Severity.P0,
                            "runtime-error-fallback.no-oom-reraise",
                            {"label": label},
                            wide_calls=wide_calls,
                            try_line=node.lineno,
                        )
                    )
                elif len(calls) > 1:
                    findings.append(
                        _handler_finding(
                            ctx,
                            handler,
                            "runtime-error-fallback",
                            Severity.P2,
                            "runtime-error-fallback.wide",
                            {"label": label, "calls": len(calls)},
                        )
                    )
    return findings
