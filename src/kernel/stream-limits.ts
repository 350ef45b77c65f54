import { DomainError } from './errors.ts';

/**
 * Open event streams of one process, counted per credential and per org (docs/decisions/faults.md). Every kind of
 * stream (job events, change feeds) acquires a lease here before its first event and releases it when it ends; a
 * lease beyond either cap is refused with 429 RATE_LIMITED and Retry-After. While open, each (credential, org) pair
 * is re-checked every `recheckMs` by one of its streams' checks: a revoked credential or a removed member ends all of
 * that pair's streams, whose `revoked` then holds the error they end with.
 */
export interface StreamLimits {
  perCredential: number;
  perOrg: number;
  recheckMs: number;
}

/** Answers the error a stream must end with, or null while its caller may still read; throwing keeps it open. */
export type AuthorityCheck = () => Promise<DomainError | null>;

export interface StreamLease {
  /** Set once the stream's authority is gone; the stream sends it as its last event. */
  readonly revoked: DomainError | null;
  release(): void;
}

/** Whole seconds a refused client should wait: streams are long-lived, so a slot frees slowly. */
export const STREAM_RETRY_AFTER_SECONDS = 10;

class Lease implements StreamLease {
  revoked: DomainError | null = null;
  private released = false;

  constructor(
    readonly group: string,
    readonly check: AuthorityCheck,
    readonly onRevoked: () => void,
    private readonly onRelease: (lease: Lease) => void,
  ) {}

  revoke(error: DomainError): void {
    if (this.revoked || this.released) return;
    this.revoked = error;
    this.onRevoked();
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.onRelease(this);
  }
}

export class StreamRegistry {
  private readonly byCredential = new Map<string, number>();
  private readonly byOrg = new Map<string, number>();
  private readonly groups = new Map<string, Set<Lease>>();
  private timer: NodeJS.Timeout | null = null;
  private checking = false;

  constructor(private readonly limits: StreamLimits) {}

  /**
   * A lease for one stream of `credential` (its type and id) in `org`; `onRevoked` wakes the stream so that it can
   * send `lease.revoked` and end. Throws RATE_LIMITED (429) when either cap is reached.
   */
  acquire(credential: string, org: string, check: AuthorityCheck, onRevoked: () => void): StreamLease {
    const [mine, theirs] = [this.byCredential.get(credential) ?? 0, this.byOrg.get(org) ?? 0];
    if (mine >= this.limits.perCredential) throw refused('credential', this.limits.perCredential);
    if (theirs >= this.limits.perOrg) throw refused('org', this.limits.perOrg);
    this.byCredential.set(credential, mine + 1);
    this.byOrg.set(org, theirs + 1);
    const group = `${credential}\n${org}`;
    const lease = new Lease(group, check, onRevoked, () => this.release(credential, org, lease));
    const members = this.groups.get(group) ?? new Set<Lease>();
    members.add(lease);
    this.groups.set(group, members);
    this.schedule();
    return lease;
  }

  /** How many streams are open: all of them, or one credential's. */
  open(credential?: string): number {
    if (credential !== undefined) return this.byCredential.get(credential) ?? 0;
    let count = 0;
    for (const members of this.groups.values()) count += members.size;
    return count;
  }

  private release(credential: string, org: string, lease: Lease): void {
    decrement(this.byCredential, credential);
    decrement(this.byOrg, org);
    const members = this.groups.get(lease.group);
    members?.delete(lease);
    if (members?.size === 0) this.groups.delete(lease.group);
    if (this.groups.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }

  private schedule(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.recheck(), this.limits.recheckMs);
    this.timer.unref();
  }

  /** One check per (credential, org) pair, not per stream; a check that fails (database down) changes nothing. */
  private async recheck(): Promise<void> {
    if (this.checking) return;
    this.checking = true;
    try {
      await Promise.all(
        [...this.groups.values()].map(async (members) => {
          const first = members.values().next().value;
          if (!first) return;
          const error = await first.check().catch(() => null);
          if (error) for (const lease of [...members]) lease.revoke(error);
        }),
      );
    } finally {
      this.checking = false;
    }
  }
}

function decrement(counts: Map<string, number>, key: string): void {
  const left = (counts.get(key) ?? 1) - 1;
  if (left > 0) counts.set(key, left);
  else counts.delete(key);
}

function refused(scope: 'credential' | 'org', limit: number): DomainError {
  const whose = scope === 'credential' ? 'this credential' : 'this organisation';
  return new DomainError(
    'RATE_LIMITED',
    `Too many open event streams for ${whose} (at most ${limit}); close one or retry later.`,
    {
      details: { limit: 'event-streams', scope, max: limit },
      retryAfter: STREAM_RETRY_AFTER_SECONDS,
    },
  );
}
