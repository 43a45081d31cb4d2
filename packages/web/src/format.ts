/** Small formatters shared by the views. */
export const when = (iso: string | null | undefined): string => {
  if (iso === null || iso === undefined) return ""
  const date = new Date(iso)
  const today = new Date()
  return date.toDateString() === today.toDateString()
    ? date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })
    : date.toLocaleDateString([], { month: "short", day: "numeric" })
}

export const fullDate = (iso: string | null | undefined) => (iso === null || iso === undefined ? "" : new Date(iso).toLocaleString())

export const bytes = (n: number): string =>
  n < 1024 ? `${n} B` : n < 1024 * 1024 ? `${(n / 1024).toFixed(1)} KB` : `${(n / 1024 / 1024).toFixed(1)} MB`

/** Copies text; answers whether it worked (clipboard needs a secure context or a user gesture). */
export const copy = async (text: string): Promise<boolean> => {
  try {
    await navigator.clipboard.writeText(text)
    return true
  } catch {
    return false
  }
}
