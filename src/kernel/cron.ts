import { CronExpressionParser } from 'cron-parser';
import { isKnownTimezone } from './timezones.ts';

/**
 * Five-field cron schedules in an explicit timezone: endpoint 7's preview (src/graph/backups/schedule-preview.ts) and the
 * backup scheduler (src/jobs/kinds/backups) share this one parser and DST rule, so a saved schedule runs exactly
 * when its preview said it would.
 *
 * The expression is parsed here, with Vixie cron's grammar and day rule, so that a 422 names the wrong field.
 * cron-parser then enumerates matching local wall-clock times (it runs in UTC, where no clock jumps), and
 * `instantOf` turns each into an instant under one rule for DST (docs/decisions/backups.md, "Schedule preview"):
 * - a local time that occurs twice (fall back) runs once, at its first occurrence;
 * - a local time that does not exist (spring forward) runs once, at the instant the clock jumps.
 * cron-parser's own DST handling is not used: it moves a skipped 02:30 to 03:30, after a 03:00 run of the same
 * schedule, and repeats a fall-back hour for some expressions but not others.
 */

interface FieldSpec {
  name: string;
  min: number;
  max: number;
  /** Three-letter names, matched case-insensitively; the first stands for `min`. */
  names?: readonly string[];
}

const FIELDS: readonly FieldSpec[] = [
  { name: 'minute', min: 0, max: 59 },
  { name: 'hour', min: 0, max: 23 },
  { name: 'day-of-month', min: 1, max: 31 },
  {
    name: 'month',
    min: 1,
    max: 12,
    names: ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'],
  },
  // 0 and 7 are both Sunday (Vixie cron).
  { name: 'day-of-week', min: 0, max: 7, names: ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'] },
];

const FIELD_LIST = FIELDS.map((field) => field.name).join(' ');
/** Longest day of each month, February counting its leap day. */
const MONTH_LENGTHS = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
export const MAX_CRON_LENGTH = 256;

/** A parsed schedule: the sorted values each field allows. */
export interface CronSchedule {
  minutes: number[];
  hours: number[];
  daysOfMonth: number[];
  months: number[];
  /** 0 = Sunday; a 7 in the expression is stored as 0. */
  daysOfWeek: number[];
  /**
   * Vixie cron: when both day fields are restricted (neither starts with `*`), a day matches if either does;
   * otherwise it must match both (a bare `*` matches every day, `*\/2` only odd days).
   */
  dayRule: 'either' | 'both';
}

export type CronParse = { ok: true; schedule: CronSchedule } | { ok: false; problems: string[] };

class FieldError extends Error {}

function valueOf(text: string, field: FieldSpec): number {
  const named = field.names?.indexOf(text.toUpperCase()) ?? -1;
  if (named >= 0) return field.min + named;
  const value = /^\d{1,2}$/.test(text) ? Number(text) : Number.NaN;
  if (value >= field.min && value <= field.max) return value;
  const names = field.names ? ` or ${field.names[0]}-${field.names.at(-1)}` : '';
  throw new FieldError(`"${text}" is not a valid ${field.name} (${field.min}-${field.max}${names})`);
}

/** One list item: `*`, `n`, `n-m`, `*\/s` or `n-m/s`. Like Vixie cron, a step needs `*` or a range before it. */
function expandItem(item: string, field: FieldSpec): number[] {
  const match = /^(?:(\*)|([0-9A-Za-z]+)(?:-([0-9A-Za-z]+))?)(?:\/(\d+))?$/.exec(item);
  if (!match) throw new FieldError(`"${item}" is not a value, range or step`);
  const [, star, first, last, stepText] = match;
  if (!star && last === undefined && stepText !== undefined) {
    throw new FieldError(`"${item}" needs * or a range before its step, e.g. ${first}-${field.max}/${stepText}`);
  }
  const low = star ? field.min : valueOf(first!, field);
  const high = star ? field.max : last === undefined ? low : valueOf(last, field);
  if (low > high)
    throw new FieldError(
      `the range "${item}" runs backwards${field.names?.[0] === 'SUN' ? ' (Sunday is 0 or 7)' : ''}`,
    );
  const step = stepText === undefined ? 1 : Number(stepText);
  if (step < 1 || step > field.max) throw new FieldError(`the step in "${item}" must be 1-${field.max}`);
  const values: number[] = [];
  for (let value = low; value <= high; value += step) values.push(value);
  return values;
}

function expandField(text: string, field: FieldSpec): number[] {
  const values = new Set(text.split(',').flatMap((item) => expandItem(item, field)));
  if (field.name === 'day-of-week' && values.delete(7)) values.add(0);
  return [...values].sort((a, b) => a - b);
}

/** Parses a five-field cron expression; problems name the field and the part that is wrong. */
export function parseCron(expression: string): CronParse {
  const text = expression.trim();
  if (text === '') return { ok: false, problems: ['must not be empty'] };
  if (text.startsWith('@')) {
    return {
      ok: false,
      problems: [
        `"${text.split(/\s/)[0]}": macros are not supported; write the five fields (${FIELD_LIST}), e.g. "0 0 * * *" for @daily`,
      ],
    };
  }
  const parts = text.split(/[ \t]+/);
  if (parts.length !== FIELDS.length) {
    return { ok: false, problems: [`must have exactly 5 fields (${FIELD_LIST}), found ${parts.length}`] };
  }
  const problems: string[] = [];
  const values = FIELDS.map((field, index) => {
    try {
      return expandField(parts[index]!, field);
    } catch (error) {
      if (!(error instanceof FieldError)) throw error;
      problems.push(`${field.name} field: ${error.message}`);
      return [];
    }
  });
  if (problems.length > 0) return { ok: false, problems };
  const [minutes, hours, daysOfMonth, months, daysOfWeek] = values as [
    number[],
    number[],
    number[],
    number[],
    number[],
  ];
  const dayRule = parts[2]!.startsWith('*') || parts[4]!.startsWith('*') ? 'both' : 'either';
  const schedule: CronSchedule = { minutes, hours, daysOfMonth, months, daysOfWeek, dayRule };
  // When the day of month must match, it must exist in some chosen month (`0 0 30 2 *` would never run).
  // Every existing date falls on every weekday within the 400-year Gregorian cycle, so nothing else can starve.
  if (dayRule === 'both' && !months.some((month) => daysOfMonth[0]! <= MONTH_LENGTHS[month - 1]!)) {
    return { ok: false, problems: [`never runs: no chosen month has a day ${daysOfMonth[0]}`] };
  }
  return { ok: true, schedule };
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterFor(zone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(zone);
  if (!formatter) {
    formatter = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    // Keyed by the name as sent; case variants of one zone are distinct keys, so keep the map bounded.
    if (formatters.size >= 1_000) formatters.clear();
    formatters.set(zone, formatter);
  }
  return formatter;
}

/** The local wall-clock time at `instant`, written as if it were UTC (so plain arithmetic works on it). */
function wallClock(instant: number, zone: string): number {
  const parts: Record<string, string> = {};
  for (const part of formatterFor(zone).formatToParts(instant)) parts[part.type] = part.value;
  const wall = new Date(0);
  wall.setUTCFullYear(Number(parts.year), Number(parts.month) - 1, Number(parts.day));
  wall.setUTCHours(Number(parts.hour), Number(parts.minute), Number(parts.second), ((instant % 1000) + 1000) % 1000);
  return wall.getTime();
}

const DAY_MS = 86_400_000;

/**
 * The instant at which a schedule with this local wall-clock time runs. Offsets are read a day either side,
 * which finds both readings of a time near a transition (tzdb transitions are further apart than two days).
 */
function instantOf(wall: number, zone: string): number {
  const offsetBefore = wallClock(wall - DAY_MS, zone) - (wall - DAY_MS);
  const offsetAfter = wallClock(wall + DAY_MS, zone) - (wall + DAY_MS);
  const readings = [wall - offsetBefore, wall - offsetAfter].filter((instant) => wallClock(instant, zone) === wall);
  if (readings.length > 0) return Math.min(...readings); // twice (fall back): the first occurrence
  // In a gap (spring forward): the first instant after it, found by bisection on whole seconds.
  let [earlier, later] = [wall - offsetAfter, wall - offsetBefore]; // wall clock before the gap / after it
  while (later - earlier > 1000) {
    const middle = earlier + Math.ceil((later - earlier) / 2000) * 1000;
    if (wallClock(middle, zone) > wall) later = middle;
    else earlier = middle;
  }
  return later;
}

function list(values: number[], field: FieldSpec): string {
  return values.length === field.max - field.min + 1 ? '*' : values.join(',');
}

/** cron-parser's input for the schedule's wall-clock times, and the weekday filter it cannot express itself. */
function enumerationOf(schedule: CronSchedule): { expression: string; weekdays: ReadonlySet<number> | null } {
  const [minute, hour, , month] = FIELDS as [FieldSpec, FieldSpec, FieldSpec, FieldSpec];
  const times = `${list(schedule.minutes, minute)} ${list(schedule.hours, hour)}`;
  const months = list(schedule.months, month);
  const allDays = schedule.daysOfMonth.length === 31;
  const allWeekdays = schedule.daysOfWeek.length === 7;
  // cron-parser ORs the day fields unless one is a literal `*`, so it can express "either" and "both" with a
  // full field; "both" with two partial fields (`*/2` and `MON`) enumerates the days of month and filters here.
  if (schedule.dayRule === 'either') {
    return {
      expression: `${times} ${schedule.daysOfMonth.join(',')} ${months} ${schedule.daysOfWeek.join(',')}`,
      weekdays: null,
    };
  }
  if (allDays)
    return { expression: `${times} * ${months} ${allWeekdays ? '*' : schedule.daysOfWeek.join(',')}`, weekdays: null };
  const weekdays = allWeekdays ? null : new Set(schedule.daysOfWeek);
  return { expression: `${times} ${schedule.daysOfMonth.join(',')} ${months} *`, weekdays };
}

/** A bound on candidates examined; valid schedules need a few hundred at most (fall-back hours, weekday filter). */
const MAX_CANDIDATES = 100_000;

/**
 * The next `count` runs strictly after `after`, as instants in ascending order. Throws a plain Error for an
 * expression `parseCron` refuses or an unknown zone: callers validate first (see PreviewBackupScheduleBody).
 */
export function nextRuns(cron: string, timezone: string, after: Date, count = 3): Date[] {
  const parsed = parseCron(cron);
  if (!parsed.ok) throw new Error(`Invalid cron expression: ${parsed.problems.join('; ')}`);
  if (!isKnownTimezone(timezone)) throw new Error(`Unknown timezone: ${timezone}`);
  const { expression, weekdays } = enumerationOf(parsed.schedule);
  // Local wall-clock times after the local time of `after`. Instants never decrease as wall times increase under
  // the DST rule above, so the first `count` distinct instants later than `after` are the answer.
  const candidates = CronExpressionParser.parse(expression, {
    tz: 'UTC',
    currentDate: new Date(wallClock(after.getTime(), timezone)),
  });
  const runs: number[] = [];
  for (let examined = 0; runs.length < count; examined += 1) {
    if (examined === MAX_CANDIDATES)
      throw new Error(`No ${count} runs found for "${cron}" within ${MAX_CANDIDATES} candidates`);
    const wall = candidates.next().getTime();
    if (weekdays && !weekdays.has(new Date(wall).getUTCDay())) {
      candidates.reset(new Date(wall - (wall % DAY_MS) + DAY_MS - 60_000)); // skip to the last minute of that day
      continue;
    }
    const instant = instantOf(wall, timezone);
    if (instant > after.getTime() && instant !== runs.at(-1)) runs.push(instant);
  }
  return runs.map((instant) => new Date(instant));
}

/**
 * The shortest gap in milliseconds between consecutive runs among a schedule's next `count` runs after `after`
 * (Infinity with fewer than two). 1,000 runs span six weeks of an hourly schedule, and every minute, hour and
 * weekday pattern repeats within a week, so a schedule that runs too often shows it here.
 */
export function shortestGap(cron: string, timezone: string, after: Date, count = 1_000): number {
  const runs = nextRuns(cron, timezone, after, count);
  let shortest = Infinity;
  for (let index = 1; index < runs.length; index += 1)
    shortest = Math.min(shortest, runs[index]!.getTime() - runs[index - 1]!.getTime());
  return shortest;
}
