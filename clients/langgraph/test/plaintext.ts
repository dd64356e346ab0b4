// What a store holds, as text to search for plaintext: every string as it
// is and every byte array decoded as UTF-8 (MemorySaver keeps serialized
// checkpoints as Uint8Array, which JSON.stringify would write as
// {"0":123,...}, where no regular expression finds a word), walking
// objects, arrays and maps. An absence check runs over this, and is shown
// able to fail on a store that holds the plaintext.
export function storedText(x: unknown, seen = new Set<unknown>()): string {
  if (typeof x === "string") return x + "\n";
  if (x instanceof Uint8Array) return new TextDecoder().decode(x) + "\n";
  if (x === null || typeof x !== "object" || seen.has(x)) return "";
  seen.add(x);
  const parts: string[] = [];
  const values = x instanceof Map ? [...x.keys(), ...x.values()] : Array.isArray(x) ? x : [...Object.keys(x), ...Object.values(x)];
  for (const v of values) parts.push(storedText(v, seen));
  return parts.join("");
}
