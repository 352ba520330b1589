import assert from "node:assert/strict";
import {
  AppNameError,
  NEW_APP_NAME,
  newAppNameProblem,
  parseAppName,
} from "../../src/deploy/app_name.ts";

/** The message `parseAppName(value)` throws. */
function parseError(value: string): string {
  try {
    parseAppName(value);
  } catch (error) {
    assert.ok(error instanceof AppNameError, String(error));
    return error.message;
  }
  assert.fail(`${value} was parsed`);
}

const RULE =
  "must match [a-z][a-z0-9-]{0,63} (a lower-case letter, then lower-case letters, digits or '-')";

Deno.test("a refused app name and a refused new app name get the one rule in one message", () => {
  assert.equal(
    parseError("Acme/Site"),
    `--app must be TENANT/APP, not 'Acme/Site': the tenant name 'Acme' ${RULE}`,
  );
  // The name the first message allows is the name the deploy takes.
  for (const value of ["acme_x/site", "acme/9shop", "acme/site_2"]) {
    const name = parseAppName(value);
    const [what, part] = NEW_APP_NAME.test(name.tenant)
      ? ["app", name.app]
      : ["tenant", name.tenant];
    assert.equal(newAppNameProblem(name), `the ${what} name '${part}' ${RULE}`);
  }
  for (
    const [value, what, part] of [
      ["acme/Site", "app", "Site"],
      ["/shop", "tenant", ""],
      ["acme/..", "app", ".."],
      ["a.b/shop", "tenant", "a.b"],
      [`acme/${"s".repeat(65)}`, "app", "s".repeat(65)],
      ["-acme/shop", "tenant", "-acme"],
    ]
  ) {
    assert.equal(
      parseError(value),
      `--app must be TENANT/APP, not '${value}': the ${what} name '${part}' ${RULE}`,
    );
  }
  assert.match(parseError("acme"), /not 'acme': it needs exactly one '\/'/);
  assert.match(parseError("a/b/c"), /it needs exactly one '\/'/);
});

Deno.test("every name the rule allows is parsed and taken by a first deploy", () => {
  for (
    const value of ["acme/shop", "a/b", "acme-2/shop-3", `${"t".repeat(64)}/${"a".repeat(64)}`]
  ) {
    const name = parseAppName(value);
    assert.equal(`${name.tenant}/${name.app}`, value);
    assert.equal(newAppNameProblem(name), undefined, value);
  }
});

Deno.test("an app deployed before the rule (a '_' or a leading digit) is still parsed, to be served", () => {
  assert.deepEqual(parseAppName("acme_x/9shop"), { tenant: "acme_x", app: "9shop" });
});
