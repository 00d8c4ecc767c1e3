// expect: strips
class Counter<T extends string> {
  #counts = new Map<T, number>();
  private readonly label: string;
  static created = 0;
  constructor(label: string) { this.label = label; Counter.created++; }
  add(key: T, by = 1): this { this.#counts.set(key, (this.#counts.get(key) ?? 0) + by); return this; }
  get size(): number { return this.#counts.size; }
  toJSON() { return { label: this.label, counts: Object.fromEntries(this.#counts) }; }
}
const c = new Counter<"x" | "y">("demo").add("x").add("y", 2);
return c.toJSON();
