// expect: strips
declare const extra: number;
declare function helper(x: unknown): asserts x is string;
declare enum Shade { Light, Dark }
const config = { retries: 3, mode: "fast" } as const satisfies Record<string, unknown>;
let total!: number;
total = 0;
outer: for (let i = 0; i < config.retries; i++) {
  for (const ch of `run-${i}`) {
    if (ch === "-") continue outer;
    total += ch.charCodeAt(0);
  }
}
const re = /a(?<name>b+)c/giu;
return { total, match: "abbbc".match(re)?.groups?.name ?? null, n: 1_000n.toString() };
