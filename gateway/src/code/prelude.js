// The worker's prelude, evaluated when the worker starts, before its run arrives, so its
// cost is off the run's path. It captures the bridge ops and the builtins it needs in
// closures, removes `Deno`, `__bootstrap` and every other non-standard global from the
// program's reach, installs `console` and `setTimeout`/`clearTimeout` (timers run inside
// the wall budget), and returns `installBindings(bindingsFactory)`: it installs `tools`,
// `callTool` and `ToolCallError` and returns the function that runs the program and
// reports its completion. A runner calls it before its run arrives, with the bindings the
// last run had, and again if its run brings others: the three stay replaceable until the
// program starts, and are sealed then. Copies of an idle worker are made before any
// bindings exist, so a run never meets another run's globals.
(function prelude() {
  "use strict";

  const { op_code_call, op_code_log, op_code_done, op_code_fail, op_code_sleep } =
    globalThis.Deno.core.ops;

  // Builtins, captured before the program can replace them.
  const ObjectCtor = Object;
  const ObjectPrototype = Object.prototype;
  const getPrototypeOf = Object.getPrototypeOf;
  const objectKeys = Object.keys;
  const defineProperty = Object.defineProperty;
  const freeze = Object.freeze;
  const ownKeys = Reflect.ownKeys;
  const deleteProperty = Reflect.deleteProperty;
  const isArray = Array.isArray;
  const isFinite = Number.isFinite;
  const { min, max, trunc } = Math;
  const collectGarbage = globalThis.gc;
  const jsonStringify = JSON.stringify;
  const jsonParse = JSON.parse;
  const StringCtor = String;
  const ErrorCtor = Error;
  const TypeErrorCtor = TypeError;

  // --- Lossless JSON -------------------------------------------------------------------

  const kindOf = (value) => {
    try {
      const ctor = value.constructor;
      if (typeof ctor === "function" && typeof ctor.name === "string" && ctor.name) {
        return ctor.name;
      }
    } catch {
      // A hostile getter: fall through.
    }
    return "object";
  };

  // The JSON text of `value`, or a TypeError naming the first part JSON would lose:
  // undefined in arrays, functions, symbols, BigInt, NaN, ±Infinity, cycles, and objects
  // that are not plain (Date, Map, class instances). Object properties that are undefined
  // are omitted, as JSON does; -0 becomes 0.
  const toJsonText = (value, what) => {
    const ancestors = [];
    const fail = (path, problem) => {
      throw new TypeErrorCtor(`${what}${path} ${problem}, which is not JSON`);
    };
    const walk = (v, path) => {
      switch (typeof v) {
        case "string":
          return jsonStringify(v);
        case "boolean":
          return v ? "true" : "false";
        case "number":
          if (!isFinite(v)) fail(path, `is ${v}`);
          return v === 0 ? "0" : jsonStringify(v);
        case "undefined":
          return fail(path, "is undefined");
        case "bigint":
          return fail(path, `is a BigInt (${v}n)`);
        case "function":
          return fail(path, "is a function");
        case "symbol":
          return fail(path, "is a symbol");
      }
      if (v === null) return "null";
      for (let i = 0; i < ancestors.length; i++) {
        if (ancestors[i] === v) fail(path, "refers back to itself (a cycle)");
      }
      ancestors[ancestors.length] = v;
      let out;
      if (isArray(v)) {
        out = "[";
        for (let i = 0; i < v.length; i++) {
          if (i > 0) out += ",";
          out += walk(v[i], `${path}[${i}]`);
        }
        out += "]";
      } else {
        const proto = getPrototypeOf(v);
        if (proto !== ObjectPrototype && proto !== null) {
          fail(path, `is a ${kindOf(v)}, not a plain object`);
        }
        out = "{";
        let first = true;
        const keys = objectKeys(v);
        for (let i = 0; i < keys.length; i++) {
          const item = v[keys[i]];
          if (item === undefined) continue;
          if (!first) out += ",";
          first = false;
          out += jsonStringify(keys[i]) + ":" + walk(item, `${path}.${keys[i]}`);
        }
        out += "}";
      }
      ancestors.length -= 1;
      return out;
    };
    return walk(value, "");
  };

  // --- Console -------------------------------------------------------------------------

  const describeError = (e) => {
    let head;
    try {
      head = `${e.name}: ${e.message}`;
    } catch {
      head = "Error";
    }
    let stack = "";
    try {
      stack = typeof e.stack === "string" ? e.stack : "";
    } catch {
      // A hostile getter: no stack.
    }
    // Frames in this prelude and the bindings are not the program's business.
    stack = stack
      .split("\n")
      .filter((line) => !line.includes("prelude.js:") && !line.includes("bindings.js:"))
      .join("\n");
    // Engines differ on whether `stack` repeats the message line.
    if (stack.startsWith(head)) return stack.trimEnd();
    return stack ? `${head}\n${stack.trimEnd()}` : head;
  };

  const show = (value) => {
    try {
      if (typeof value === "string") return value;
      if (value instanceof ErrorCtor) return describeError(value);
      if (typeof value !== "object" || value === null) return StringCtor(value);
      const seen = [];
      return jsonStringify(value, function (key, v) {
        if (typeof v === "bigint") return `${v}n`;
        if (typeof v === "function") return `[Function ${v.name || "anonymous"}]`;
        if (typeof v === "symbol" || typeof v === "number") {
          return typeof v === "number" && isFinite(v) ? v : StringCtor(v);
        }
        if (v === undefined) return key === "" ? "undefined" : v;
        if (typeof v === "object" && v !== null) {
          for (let i = 0; i < seen.length; i++) {
            if (seen[i] === v) return "[Circular]";
          }
          seen[seen.length] = v;
        }
        return v;
      });
    } catch {
      return "[unprintable value]";
    }
  };

  const print = (...args) => {
    let line = "";
    for (let i = 0; i < args.length; i++) {
      if (i > 0) line += " ";
      line += show(args[i]);
    }
    op_code_log(line);
  };
  const console = freeze({
    log: print,
    info: print,
    warn: print,
    error: print,
    debug: print,
  });

  // --- Timers --------------------------------------------------------------------------

  const liveTimers = ObjectCtor.create(null);
  let nextTimer = 1;
  const setTimeout = (callback, ms, ...args) => {
    if (typeof callback !== "function") {
      throw new TypeErrorCtor("setTimeout needs a function");
    }
    const delay = isFinite(+ms) ? min(max(trunc(+ms), 0), 2147483647) : 0;
    const id = nextTimer++;
    liveTimers[id] = true;
    op_code_sleep(delay).then(() => {
      if (liveTimers[id] === true) {
        delete liveTimers[id];
        callback(...args);
      }
    });
    return id;
  };
  const clearTimeout = (id) => {
    delete liveTimers[id];
  };

  // --- Tool bindings -------------------------------------------------------------------

  // The only way out of the worker: the call id is assigned by the op, in call order.
  const hostCall = async (name, args) => {
    if (typeof name !== "string") {
      throw new TypeErrorCtor("the tool name must be a string");
    }
    const text = toJsonText(args === undefined ? {} : args, "the arguments");
    return jsonParse(await op_code_call(name, text));
  };

  // --- The program's world -------------------------------------------------------------

  const standardGlobals = [
    "globalThis", "Infinity", "NaN", "undefined", "eval", "isFinite", "isNaN",
    "parseFloat", "parseInt", "decodeURI", "decodeURIComponent", "encodeURI",
    "encodeURIComponent", "escape", "unescape", "Object", "Function", "Array", "Number",
    "Boolean", "String", "Symbol", "BigInt", "Math", "JSON", "Reflect", "Proxy", "Date",
    "RegExp", "Promise", "Map", "Set", "WeakMap", "WeakSet", "WeakRef",
    "FinalizationRegistry", "Iterator", "Error", "AggregateError", "EvalError",
    "RangeError", "ReferenceError", "SyntaxError", "TypeError", "URIError",
    "ArrayBuffer", "SharedArrayBuffer", "DataView", "Atomics", "Int8Array", "Uint8Array",
    "Uint8ClampedArray", "Int16Array", "Uint16Array", "Int32Array", "Uint32Array",
    "Float16Array", "Float32Array", "Float64Array", "BigInt64Array", "BigUint64Array",
    "InternalError", "Intl", "queueMicrotask", "structuredClone", "TextEncoder", "TextDecoder",
    "atob", "btoa", "URL", "URLSearchParams", "DisposableStack", "AsyncDisposableStack",
    "SuppressedError",
  ];
  const keep = ObjectCtor.create(null);
  for (let i = 0; i < standardGlobals.length; i++) keep[standardGlobals[i]] = true;
  const install = (name, value, configurable = false) =>
    defineProperty(globalThis, name, {
      value,
      writable: false,
      enumerable: false,
      configurable,
    });
  const bindingNames = ["tools", "callTool", "ToolCallError"];

  // --- Running the program -------------------------------------------------------------

  const describeThrown = (e) => {
    if (e instanceof ErrorCtor) return describeError(e);
    return `Uncaught ${show(e)}`;
  };

  const runProgram = async (program) => {
    for (let i = 0; i < bindingNames.length; i++) {
      defineProperty(globalThis, bindingNames[i], { configurable: false });
    }
    let value;
    try {
      value = await program();
    } catch (e) {
      let message;
      try {
        message = describeThrown(e);
      } catch {
        message = "Uncaught exception (describing it threw again)";
      }
      op_code_fail(message);
      return;
    }
    if (value === undefined) {
      op_code_done("");
      return;
    }
    let text;
    try {
      text = toJsonText(value, "the result");
    } catch (e) {
      op_code_fail(`TypeError: ${e.message}`);
      return;
    }
    op_code_done(text);
  };

  // Out of the program's reach from here on; what the prelude needs is captured above.
  const globalKeys = ownKeys(globalThis);
  for (let i = 0; i < globalKeys.length; i++) {
    const key = globalKeys[i];
    if (typeof key === "symbol" || keep[key] !== true) deleteProperty(globalThis, key);
  }
  install("console", console);
  install("setTimeout", setTimeout);
  install("clearTimeout", clearTimeout);
  // Collect the start-up garbage now, so the first collection is not on the run's path.
  if (typeof collectGarbage === "function") collectGarbage();

  return function installBindings(bindingsFactory) {
    const made = bindingsFactory(hostCall);
    for (let i = 0; i < bindingNames.length; i++) {
      install(bindingNames[i], made[bindingNames[i]], true);
    }
    return runProgram;
  };
})()
