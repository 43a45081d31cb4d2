const addressPattern = /^[^\s@<>()",;:\\[\]]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)+$/

/** An RFC 5322 mailbox: `address` or `Display Name <address>` (a quoted name may hold specials). */
export const parseMailbox = (input: string): { name: string | null; address: string } | undefined => {
  const trimmed = input.trim()
  if (/[\r\n]/.test(trimmed)) return undefined
  const angle = /^(.*?)\s*<([^<>]+)>$/.exec(trimmed)
  if (angle) {
    const rawName = angle[1]!.trim()
    const name = rawName.startsWith('"') && rawName.endsWith('"') && rawName.length >= 2 ? rawName.slice(1, -1) : rawName
    return addressPattern.test(angle[2]!) ? { name: name === "" ? null : name, address: angle[2]! } : undefined
  }
  return addressPattern.test(trimmed) ? { name: null, address: trimmed } : undefined
}
