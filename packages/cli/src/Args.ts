/** A small argv reader: positionals, `--flag value`, `--flag=value` and bare `--flag`. */
export interface Args {
  readonly positional: ReadonlyArray<string>
  readonly values: ReadonlyMap<string, string>
  readonly flags: ReadonlySet<string>
}

const booleanFlags = new Set(["admin", "clear", "help", "json", "otp", "link", "detach", "ephemeral", "remove"])

export class CliError extends Error {
  readonly code: string
  constructor(code: string, message: string) {
    super(message)
    this.code = code
  }
}

/** Every flag that takes a value, across the commands: a name in neither set is an unknown flag. */
const valueFlags = new Set(["account", "alias", "batch", "batches", "domain", "email", "label", "name", "out", "password", "plan", "scopes", "set", "since", "style", "tier", "timeout"])

export const parseArgs = (argv: ReadonlyArray<string>): Args => {
  const positional: Array<string> = []
  const values = new Map<string, string>()
  const flags = new Set<string>()
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (!arg.startsWith("--")) {
      positional.push(arg)
      continue
    }
    const [name, inline] = arg.slice(2).split(/=(.*)/s, 2) as [string, string | undefined]
    if (!booleanFlags.has(name) && !valueFlags.has(name)) throw new CliError("unknown_flag", `unknown flag --${name}`)
    if (inline !== undefined) values.set(name, inline)
    else if (booleanFlags.has(name)) flags.add(name)
    else if (i + 1 < argv.length) values.set(name, argv[++i]!)
    else throw new CliError("missing_value", `--${name} needs a value`)
  }
  return { positional, values, flags }
}

export const flag = (args: Args, name: string): string | undefined => args.values.get(name)

export const required = (args: Args, name: string): string => {
  const value = args.values.get(name)
  if (value === undefined || value === "") throw new CliError("missing_flag", `--${name} is required`)
  return value
}
