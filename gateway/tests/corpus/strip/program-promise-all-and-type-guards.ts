// expect: strips
interface Entry { key: string; value?: string | null }
const keys: string[] = ["a", "b", "c"];
const entries: Entry[] = await Promise.all(
  keys.map(async (key): Promise<Entry> => ({ key, value: (await tools.kv.get({ key })).value })),
);
return entries.filter((e): e is Entry & { value: string } => e.value != null);
