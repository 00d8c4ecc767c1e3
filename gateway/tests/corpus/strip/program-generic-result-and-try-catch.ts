// expect: strips
type Result<T, E = Error> = { ok: true; value: T } | { ok: false; error: E };
async function attempt<T>(f: () => Promise<T>): Promise<Result<T>> {
  try {
    return { ok: true, value: await f() };
  } catch (e) {
    if (e instanceof ToolCallError) console.error(e.tool, e.code);
    return { ok: false, error: e as Error };
  }
}
const r = await attempt(() => tools.kv.get({ key: "x" }));
return r.ok ? r.value : String(r.error);
