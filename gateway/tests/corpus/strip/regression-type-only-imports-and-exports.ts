// expect: strips
import type { Entry } from "./types";
import { type Options, type Result as R } from "./options";
export type Key = string;
export interface Row { key: Key; entry: Entry }
export type { R };
export {};
function keys(rows: Row[]): Key[] {
  import type Extra from "./extra";
  export type Local = Extra;
  return rows.map((r) => r.key);
}
{
  export type * from "./everything";
}
const options: Options = {} as Options;
return keys([]).length + Object.keys(options).length;
