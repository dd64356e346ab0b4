import { InvalidArgument } from "./errors.js";

/**
 * checkKeys throws InvalidArgument when an options object (from plain
 * JavaScript, or cast) holds a key the call does not know: a misspelt
 * `parent` for `parents` must not seal a derivative without its lineage.
 */
export function checkKeys(o: unknown, allowed: readonly string[], what: string): void {
  if (o === undefined) return;
  if (o === null || typeof o !== "object" || Array.isArray(o)) throw new InvalidArgument(`${what}: not an options object`);
  for (const k of Object.keys(o)) {
    if (!allowed.includes(k)) throw new InvalidArgument(`${what}: unknown option "${k}" (known: ${allowed.join(", ")})`);
  }
}

export function checkString(v: unknown, what: string): string {
  if (typeof v !== "string" || v === "") throw new InvalidArgument(`${what} must be a non-empty string`);
  return v;
}

export function checkStrings(v: unknown, what: string): string[] {
  if (v === undefined) return [];
  if (!Array.isArray(v) || v.some((x) => typeof x !== "string" || x === "")) {
    throw new InvalidArgument(`${what} must be an array of non-empty strings`);
  }
  return [...(v as string[])];
}

export function checkBytes(v: unknown, what: string): Uint8Array {
  if (!(v instanceof Uint8Array)) throw new InvalidArgument(`${what} must be a Uint8Array (encode text first)`);
  return v;
}

const ID = /^[0-9a-f]{32}$/;
export function checkID(v: unknown, what: string): string {
  if (typeof v !== "string" || !ID.test(v)) throw new InvalidArgument(`${what} ids are 32 lower-case hex digits`);
  return v;
}

const UNIT = /^[A-Za-z0-9._:-]{1,64}$/;
/** checkUnit checks a unit label: 1-64 characters of A-Za-z0-9._:- . */
export function checkUnit(v: unknown, what: string): string {
  if (typeof v !== "string" || !UNIT.test(v)) throw new InvalidArgument(`${what}: a unit is 1-64 characters of A-Za-z0-9._:-`);
  return v;
}
