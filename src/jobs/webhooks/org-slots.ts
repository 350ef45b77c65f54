/**
 * How one worker shares its WEBHOOK_CONCURRENCY delivery slots between orgs (issue 48; docs/decisions/webhooks.md,
 * "Slots shared between orgs"). A slot cannot be taken back from an attempt in flight: it is held until the
 * receiver answers or WEBHOOK_TIMEOUT_MS (10 s by default, at most 60 s) runs out. So fairness is kept when a slot is
 * given:
 * - one org holds at most half of the slots (`slotsPerOrg`), so that another org's endpoint finds a free slot at
 *   once however many of the first org's receivers hang (before: 16 slow endpoints of one org held all 16 slots, and
 *   another org's delivery lag went from 135 ms to 71 s);
 * - a free slot goes to the waiting org that holds the fewest, then to the one whose last turn is the oldest: with
 *   equal counts a round robin between orgs, as the job claim is (docs/decisions/jobs.md, "Fair claiming");
 * - within an org, to its endpoints in the order they were found due.
 * Claims are bounded (deliverer.ts, CLAIM_MS and MESSAGES_PER_CLAIM), so slots turn over and a third org, which may
 * find the slots full, waits at most one claim's bound and one attempt.
 */

/** An endpoint with something to deliver, and the org it belongs to. */
export interface Candidate {
  id: string;
  orgId: string;
}

/**
 * Of `concurrency` slots, how many one org's endpoints may hold: half, rounded up. Half rather than "all but one" (the
 * job runner's JOB_SLOTS_PER_ORG): a delivery slot is cheap to leave free (a socket and two pooled connections), and a
 * second org with slow receivers of its own must still leave room for a third. A lone org's slow receivers get 8 at
 * once per worker instead of 16; an install with one org raises WEBHOOK_CONCURRENCY (its figure is what one org gets
 * times two), so no setting of its own.
 */
export function slotsPerOrg(concurrency: number): number {
  return Math.ceil(concurrency / 2);
}

export class OrgSlots {
  readonly perOrg: number;
  private readonly held = new Map<string, number>();
  /** When each org last got a slot (a turn counter): never is 0, so a newcomer goes first among equals. */
  private readonly lastTurn = new Map<string, number>();
  private turns = 0;
  private used = 0;

  constructor(private readonly total: number) {
    this.perOrg = slotsPerOrg(total);
  }

  /** Takes a slot for each candidate to start now (at most the free ones), fairly between orgs; answers them in order. */
  take(candidates: readonly Candidate[]): Candidate[] {
    const waiting = new Map<string, Candidate[]>();
    for (const candidate of candidates) {
      const queue = waiting.get(candidate.orgId);
      if (queue) queue.push(candidate);
      else waiting.set(candidate.orgId, [candidate]);
    }
    const started: Candidate[] = [];
    for (let orgId = this.nextOrg(waiting); orgId !== undefined; orgId = this.nextOrg(waiting)) {
      const queue = waiting.get(orgId)!;
      started.push(queue.shift()!);
      if (queue.length === 0) waiting.delete(orgId);
      this.held.set(orgId, (this.held.get(orgId) ?? 0) + 1);
      this.lastTurn.set(orgId, ++this.turns);
      this.used += 1;
    }
    return started;
  }

  /** A claim of the org's ended: its slot is free. */
  give(orgId: string): void {
    const held = (this.held.get(orgId) ?? 0) - 1;
    if (held > 0) this.held.set(orgId, held);
    else this.held.delete(orgId);
    this.used -= 1;
  }

  /** The waiting org to give the next slot to, if a slot is free and an org below its share waits. */
  private nextOrg(waiting: ReadonlyMap<string, Candidate[]>): string | undefined {
    if (this.used >= this.total) return undefined;
    let best: { orgId: string; held: number; turn: number } | undefined;
    for (const orgId of waiting.keys()) {
      const held = this.held.get(orgId) ?? 0;
      if (held >= this.perOrg) continue;
      const turn = this.lastTurn.get(orgId) ?? 0;
      if (!best || held < best.held || (held === best.held && turn < best.turn)) best = { orgId, held, turn };
    }
    return best?.orgId;
  }
}
