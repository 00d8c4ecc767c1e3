// expect: refused 3:42: parameter properties
abstract class Shape { abstract area(): number; describe(): string { return `${this.area().toFixed(2)}`; } }
class Square extends Shape { constructor(public side: number) { super(); } area() { return this.side ** 2; } }
function overload(x: string): string;
function overload(x: number): number;
function overload(x: any) { return x; }
const [first, ...rest]: [number, ...string[]] = [1, "a", "b"];
const { a = 1, b: { c } = { c: 2 } } = {} as { a?: number; b?: { c: number } };
return [overload(first), rest.length, a, c];
