/**
 * The actor a path `/actor/<class>/<name>[/<rest>]` names.
 *
 * @module
 */

import { actorNameProblem, classNameProblem } from "../actors/key.ts";

/** An actor path's class, name and what follows the name. */
export interface ActorTarget {
  className: string;
  name: string;
  /** What follows the name, `/` when nothing does. */
  rest: string;
}

/**
 * The actor a path `/actor/<class>/<name>[/<rest>]` names, with what
 * follows its name (`/` when nothing does); or the status and line of the
 * answer refusing it (400 for a name that is not valid, or a class no node
 * could have, 404 for a class this node does not have).
 *
 * @example
 * ```ts
 * import { actorTarget } from "./actor_target.ts";
 * actorTarget("/actor/room/lobby/chat", () => true); // { className: "room", name: "lobby", rest: "/chat" }
 * ```
 */
export function actorTarget(
  pathname: string,
  hasClass: (name: string) => boolean,
): ActorTarget | { status: number; line: string } {
  const [, , rawClass, rawName, ...rest] = pathname.split("/");
  let className: string;
  let name: string;
  try {
    className = decodeURIComponent(rawClass);
    name = decodeURIComponent(rawName ?? "");
  } catch {
    return { status: 400, line: "bad request: the path is not valid percent-encoding" };
  }
  if (!hasClass(className)) {
    // Empty, too long or with control characters, no node could serve it:
    // a bad class, not a missing one (and never echoed back).
    if (className.length === 0) {
      return {
        status: 400,
        line: "bad actor class: the path names no class (/actor/<class>/<name>)",
      };
    }
    const shape = classNameProblem(className);
    if (shape && actorNameProblem(className)) {
      return { status: 400, line: `bad actor class: ${shape}` };
    }
    return { status: 404, line: `no actor class '${className}' on this node` };
  }
  const problem = actorNameProblem(name);
  if (problem) return { status: 400, line: `bad actor name: ${problem}` };
  return { className, name, rest: rest.length > 0 ? "/" + rest.join("/") : "/" };
}

/** A path step the URL parser resolves: `.` or `..`, either percent-encoded or not. */
const DOT_SEGMENT = /^(?:\.|%2e){1,2}$/i;

/**
 * Why the request target as sent (`request.url` in Deno.serve, before the
 * URL parser resolves `.` and `..`) names an actor's class or name with a
 * `.` or `..` step, or `undefined`. Resolved, `/actor/counter/..` would be
 * `/actor/`, a path naming no class at all.
 *
 * @example
 * ```ts
 * import { dotSegmentProblem } from "./actor_target.ts";
 * dotSegmentProblem("http://a/actor/counter/%2e%2e"); // { status: 400, line: "bad actor name: ..." }
 * dotSegmentProblem("http://a/actor/counter/alice"); // undefined
 * ```
 */
export function dotSegmentProblem(sent: string): { status: 400; line: string } | undefined {
  // The URL parser takes a backslash for a slash in http(s) URLs.
  const target = sent.replaceAll("\\", "/");
  if (!target.includes("/.") && !/%2e/i.test(target)) return undefined;
  const start = target.indexOf("/", target.indexOf("//") + 2);
  if (start < 0) return undefined;
  const [, first, rawClass, rawName] = target.slice(start).split(/[?#]/, 1)[0].split("/");
  if (first !== "actor") return undefined;
  if (rawClass !== undefined && DOT_SEGMENT.test(rawClass)) {
    return { status: 400, line: "bad actor class: the class must not be '.' or '..'" };
  }
  if (rawName !== undefined && DOT_SEGMENT.test(rawName)) {
    return { status: 400, line: `bad actor name: ${actorNameProblem("..")}` };
  }
  return undefined;
}
