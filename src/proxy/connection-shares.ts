import type { LimitName } from '../metrics/limit-counters.js';

/** Peers, heaviest first, whose connections are searched for one to close, per admission at the limit. */
export const PEERS_TRIED = 4;
/** Connections of one peer checked per search (those carrying a request rotate to the back). */
export const CONNECTIONS_CHECKED = 64;
/**
 * How long a connection must have gone unused (silent since accepted, or its first head arriving
 * since then) before it may be closed for another peer's. A client that connects ahead of its
 * request (a gateway's preconnect) writes it within milliseconds; closing such a connection in
 * that moment would reset a request its client believes sent, unread yet by tokentap (the security
 * review's gateway, writing 50 ms after connecting, lost 30 POSTs of 30). A hostile holder's
 * sockets pass this age within the second; a legitimate head takes milliseconds.
 */
export const UNUSED_BEFORE_DISPLACED_MS = 1_000;

/** What admission needs of an open client connection. */
export interface SharedConnection {
  /**
   * Has never carried a request, owes its client nothing, and has been so for
   * UNUSED_BEFORE_DISPLACED_MS: its first head may be arriving.
   */
  readonly unused: boolean;
  /** Unused, and not a byte of a request head has come: connected and silent. */
  readonly silent: boolean;
  /** Closes it at once, synchronously forgotten (ClientConnection.cut). */
  cut(): void;
}

/** A new connection's fate: admitted (perhaps in place of another peer's), or refused by the named limit. */
export type AdmissionDecision<C> =
  | { readonly admitted: true; readonly replaced?: { readonly peer: string; readonly held: number; readonly connection: C } }
  | { readonly admitted: false; readonly limit: Extract<LimitName, 'connections' | 'connections_per_client'> };

/**
 * The client connections open at once, per peer address, and who may open one more.
 *
 * Below `limits.max_connections` every connection is admitted (up to
 * `limits.max_connections_per_client` from one address). At the limit, a connection from a peer
 * holding fewer connections takes the place of a connection of the peer holding the most (at least
 * two more than the newcomer's peer, so the move makes the shares more even) that has never carried
 * a request, for at least UNUSED_BEFORE_DISPLACED_MS: a silent one first, else one whose first head
 * is still arriving. Neither loses an answer still being delivered, and the age keeps clear of a
 * client writing its first request right after connecting. A kept-alive connection
 * that served requests is never chosen: its client may have written the next request a moment ago,
 * unread yet, and closing it would reset that request (a security review reset 30 of 30 POSTs so);
 * such connections end by the keep-alive timeout. A request in flight is never cut. Only when no
 * such connection exists is the newcomer refused.
 *
 * So a single peer (the mesh sidecar's 127.0.0.6, an ingress, a node's SNAT address: in a pod the
 * clients are often one or a few gateways) keeps the whole limit, and a client that holds idle or
 * half-open sockets cannot lock others out: before this, one client holding 64 sockets against
 * `max_connections: 32` made 22 of another client's 40 connections reset (issue 23). A fixed
 * per-peer share (nginx's `limit_conn` per address) would hold slots back from the lone gateway;
 * it is there as `max_connections_per_client`, for listeners clients reach by their own addresses.
 *
 * The search for a connection to replace runs only at the limit, and is bounded (replaceable()); it
 * is skipped at once when no peer holds two more than the newcomer's (the heaviest peer's count is
 * kept up to date), so a flood of attempts from one-connection peers costs no scan.
 */
export class ConnectionShares<C extends SharedConnection> {
  private readonly peers = new Map<string, Set<C>>();
  private open = 0;
  /** Peers by the number of connections they hold, and the largest such number. */
  private readonly peersHolding = new Map<number, number>();
  private heaviest = 0;

  constructor(
    private readonly maxConnections: number,
    private readonly maxPerPeer: number,
  ) {}

  /** Decides on a new connection from `peer`; a replaced connection has been cut already. */
  admit(peer: string): AdmissionDecision<C> {
    const held = this.peers.get(peer)?.size ?? 0;
    // A per-peer cap at (or above) max_connections is no cap: a lone peer at the limit is refused by max_connections.
    if (held >= this.maxPerPeer && this.maxPerPeer < this.maxConnections) return { admitted: false, limit: 'connections_per_client' };
    if (this.open < this.maxConnections) return { admitted: true };
    const replaced = this.replaceable(held);
    if (replaced === undefined) return { admitted: false, limit: 'connections' };
    replaced.connection.cut();
    return { admitted: true, replaced };
  }

  add(peer: string, connection: C): void {
    let connections = this.peers.get(peer);
    if (connections === undefined) {
      connections = new Set();
      this.peers.set(peer, connections);
    }
    connections.add(connection);
    this.open++;
    this.resized(connections.size - 1, connections.size);
  }

  remove(peer: string, connection: C): void {
    const connections = this.peers.get(peer);
    if (connections === undefined || !connections.delete(connection)) return;
    this.open--;
    this.resized(connections.size + 1, connections.size);
    if (connections.size === 0) this.peers.delete(peer);
  }

  /** One peer went from holding `from` connections to `to` (one more or one fewer). */
  private resized(from: number, to: number): void {
    const left = (this.peersHolding.get(from) ?? 0) - 1;
    if (left > 0) this.peersHolding.set(from, left);
    else this.peersHolding.delete(from);
    if (to > 0) this.peersHolding.set(to, (this.peersHolding.get(to) ?? 0) + 1);
    // Counts move by one, so when the last peer at the maximum loses one, it holds the new maximum.
    if (to > this.heaviest) this.heaviest = to;
    else if (from === this.heaviest && left <= 0) this.heaviest = to;
  }

  /**
   * The connection to close for a newcomer whose peer holds `held`: of the heaviest peer that has
   * one, among peers holding at least `held + 2`. Bounded per admission, as it runs once per
   * connection attempt while the listener is full (a flood of them, under attack): one pass over
   * the peers, then at most PEERS_TRIED peers and CONNECTIONS_CHECKED connections of each. A
   * connection found carrying a request is moved to the back of its peer's set, so the next search
   * looks at others: a client cannot hide idle sockets behind its busy ones for long.
   */
  private replaceable(held: number): { peer: string; held: number; connection: C } | undefined {
    if (this.heaviest < held + 2) return undefined;
    const heavier: Array<[string, Set<C>]> = [];
    for (const entry of this.peers) if (entry[1].size >= held + 2) heavier.push(entry);
    for (let tried = 0; tried < PEERS_TRIED && heavier.length > 0; tried++) {
      let heaviest = 0;
      for (let i = 1; i < heavier.length; i++) if ((heavier[i] as [string, Set<C>])[1].size > (heavier[heaviest] as [string, Set<C>])[1].size) heaviest = i;
      const [peer, connections] = heavier.splice(heaviest, 1)[0] as [string, Set<C>];
      const size = connections.size;
      const connection = this.withoutRequest(connections);
      if (connection !== undefined) return { peer, held: size, connection };
    }
    return undefined;
  }

  /** A silent connection of `connections` if one is among those checked, else an unused one whose head is arriving. */
  private withoutRequest(connections: Set<C>): C | undefined {
    const checks = Math.min(CONNECTIONS_CHECKED, connections.size);
    let checked = 0;
    let waiting: C | undefined;
    for (const connection of connections) {
      if (checked++ >= checks) break;
      if (connection.silent) return connection;
      if (connection.unused) {
        waiting ??= connection;
      } else {
        connections.delete(connection);
        connections.add(connection);
      }
    }
    return waiting;
  }
}
