/**
 * Time zone names the runtime's ICU knows: IANA canonical names and their aliases (`Asia/Kolkata`, `US/Eastern`,
 * `Etc/UTC`), plus `UTC`; matched as ICU matches them, ignoring case. UTC offsets such as `+01:00`, which newer
 * runtimes accept as well, are refused: a zone is a name, and an offset has no DST rules.
 */
export function isKnownTimezone(name: string): boolean {
  if (!/^[A-Za-z]/.test(name)) return false;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
    return true;
  } catch {
    return false;
  }
}
