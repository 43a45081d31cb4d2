/**
 * Verification links (`verificationLinks`, spec 2.11, and `otp.links` of webhook events, 6.3):
 * the links a person would click to confirm an address, sign in or reset a password.
 *
 * Each http(s) link is scored on what its URL and its words say (the anchor text in HTML, the
 * words before it in plain text). Only links with a positive score of at least
 * `MIN_SCORE` are returned: a link that says nothing about verification is not one, so a mail
 * without such a link gives an empty list. Footer links are excluded whatever their score.
 */
import type { CheckedHtml } from "./limits.ts"
import { messageText, walkHtml } from "./sanitize.ts"

const MAX_LINKS = 3

export interface MailBodies {
  readonly text: string | null
  /** Only HTML within the limits has its anchors read; pass null for HTML past them. */
  readonly html: CheckedHtml | null
}

/** One place a URL was found, with the words that describe it there. */
interface LinkOccurrence {
  readonly url: string
  readonly context: string
}

// ---------------------------------------------------------------------------------------------
// Finding links
// ---------------------------------------------------------------------------------------------

/** The absolute http(s) URL, normalized as a browser would, or undefined for anything else. */
const httpUrl = (raw: string): string | undefined => {
  try {
    const url = new URL(raw.trim())
    return (url.protocol === "http:" || url.protocol === "https:") && url.hostname !== "" ? url.href : undefined
  } catch {
    return undefined
  }
}

/** Anchors in document order; their context is their text, image alt texts, title and aria-label. */
const htmlLinkOccurrences = (html: CheckedHtml): Array<LinkOccurrence> => {
  const found: Array<LinkOccurrence> = []
  // Anchors may nest in broken markup. Text belongs to the innermost one, as in a browser
  // (where an <a> closes the one before it), and the work stays linear.
  const open: Array<{ url: string | undefined; words: Array<string> }> = []
  const addWords = (words: string) => open.at(-1)?.words.push(words)
  walkHtml(html, {
    open: (tag, attributes) => {
      if (tag === "a") {
        open.push({
          url: attributes.href === undefined ? undefined : httpUrl(attributes.href),
          words: [attributes.title ?? "", attributes["aria-label"] ?? ""]
        })
      } else if (tag === "img") {
        addWords(` ${attributes.alt ?? ""} `)
      } else if (tag === "br" || tag === "p" || tag === "div" || tag === "td") {
        addWords(" ")
      }
    },
    text: addWords,
    close: (tag) => {
      if (tag !== "a") return
      const anchor = open.pop()
      if (anchor?.url !== undefined) found.push({ url: anchor.url, context: anchor.words.join(" ") })
    }
  })
  return found
}

const TEXT_URL = /https?:\/\/[^\s<>"'`]+/gi
const TEXT_URL_START = /https?:\/\//i

const OPENING_BRACKET: Readonly<Record<string, string>> = { ")": "(", "]": "[", "}": "{" }

const countOf = (text: string, character: string): number => text.split(character).length - 1

/**
 * Punctuation that ends a sentence or wraps a URL in prose is not part of it; a closing bracket
 * is kept when the URL opened it (as in Wikipedia-style paths).
 */
const trimTrailingPunctuation = (url: string): string => {
  // Bracket balance counted once, so a URL ending in thousands of ")" stays linear.
  const balance = new Map(Object.entries(OPENING_BRACKET).map(([close, open]) => [close, countOf(url, open) - countOf(url, close)]))
  let end = url.length
  for (; end > 0; end--) {
    const last = url.charAt(end - 1)
    const bracketBalance = balance.get(last)
    if (bracketBalance !== undefined && bracketBalance < 0) balance.set(last, bracketBalance + 1)
    else if (!".,;:!?*".includes(last)) break
  }
  return url.slice(0, end)
}

/**
 * URLs written out in text. The context is the text between the previous URL on the line and
 * this one; a URL alone on its line is described by the nearest non-empty line above it.
 */
const textLinkOccurrences = (text: string): Array<LinkOccurrence> => {
  const found: Array<LinkOccurrence> = []
  // Most text parts hold no URL: then there is no line to read.
  if (!TEXT_URL_START.test(text)) return found
  let previousLine = ""
  for (const line of text.split(/\r?\n/)) {
    let contextStart = 0
    for (const match of line.matchAll(TEXT_URL)) {
      const before = line.slice(contextStart, match.index)
      const context = contextStart === 0 && !/\p{L}/u.test(before) ? previousLine : before
      // Some senders HTML-escape their text part; `&amp;` in a URL is never meant literally.
      const url = httpUrl(trimTrailingPunctuation(match[0]).replaceAll("&amp;", "&"))
      if (url !== undefined) found.push({ url, context })
      contextStart = match.index + match[0].length
    }
    if (line.trim() !== "") previousLine = line
  }
  return found
}

// ---------------------------------------------------------------------------------------------
// Words
// ---------------------------------------------------------------------------------------------

/** Lower case without accents, so one spelling matches "désabonner" and "desabonner". */
const foldText = (text: string): string =>
  text.normalize("NFKD").replace(/\p{M}/gu, "").toLowerCase().replace(/[\u2018\u2019`´]/g, "'")

/** A pattern that matches any of the phrases as whole words (Unicode-aware, unlike `\b`). */
const phrases = (list: ReadonlyArray<string>): RegExp => {
  const alternatives = list.map((phrase) => phrase.replace(/[.*+?^${}()|[\]\\]/g, "\\$&").replace(/ /g, "[\\s\\-_]*"))
  return new RegExp(`(?<![\\p{L}\\p{N}])(?:${alternatives.join("|")})(?![\\p{L}\\p{N}])`, "u")
}

/** Words that begin with one of the stems ("confirm" matches "confirmation", "confirmar"). */
const stems = (list: ReadonlyArray<string>): RegExp => {
  const alternatives = list.map((stem) => stem.replace(/ /g, "[\\s\\-_]*"))
  return new RegExp(`(?<![\\p{L}\\p{N}])(?:${alternatives.join("|")})`, "u")
}

/** URL words: path segments, query names and values split on punctuation and camelCase. */
const urlWords = (url: URL): Array<string> => {
  const subdomains = url.hostname.split(".").slice(0, -2)
  const queryParts = [...url.searchParams].flatMap(([name, value]) =>
    // A value holding another URL (a redirect target) describes that page, not this link.
    /[/:]/.test(value) ? [name] : [name, value]
  )
  return [...subdomains, ...safeDecode(url.pathname).split("/"), ...queryParts]
    .flatMap((part) => part.replace(/([a-z])([A-Z])/g, "$1 $2").split(/[^\p{L}\p{N}]+/u))
    .map(foldText)
    .filter((word) => word !== "")
}

const safeDecode = (text: string): string => {
  try {
    return decodeURIComponent(text)
  } catch {
    return text
  }
}

/**
 * URL words, plus neighbours joined in pairs so "sign-in" and "magic_link" also read "signin"
 * and "magiclink". Only words of two letters or more are joined: "a/gb" is not "agb".
 */
const joinable = (word: string | undefined): word is string => word !== undefined && /^\p{L}{2,}$/u.test(word)

const urlPhrase = (words: ReadonlyArray<string>): string => {
  const pairs = words.flatMap((word, index) => {
    const previous = words[index - 1]
    return joinable(previous) && joinable(word) ? [`${previous}${word}`] : []
  })
  return [...words, ...pairs].join(" ")
}

// ---------------------------------------------------------------------------------------------
// What a link says
// ---------------------------------------------------------------------------------------------

/** Confirming an address or an account, in the languages we read. */
const VERIFY_STEMS = [
  "verif", "confirm", "activat", "activer", "activar", "activeer", "activeren", "aktivier", "attiva",
  "ativar", "ative", "validat", "valider", "validar", "convalid", "bestatig", "bevestig", "conferm"
]
/** Signing in, including magic links. */
const SIGN_IN_PHRASES = [
  "sign in", "signin", "log in", "login", "logon", "log on", "magic link", "magiclink", "anmelden",
  "einloggen", "se connecter", "connexion", "iniciar sesion", "inicia sesion", "inloggen",
  "aanmelden", "accedi", "accedere", "entrar", "fazer login"
]
/** Resetting a password. */
const RESET_STEMS = [
  "reset", "password", "passwort", "mot de passe", "reinitialis", "restablec", "contrasena",
  "wachtwoord", "reimposta", "redefin", "senha", "kennwort"
]

/**
 * Footer links that are never verification links, whatever else they say: unsubscribing,
 * preferences, legal pages, app stores.
 */
const FOOTER_PHRASES = [
  // unsubscribe and preferences
  "unsubscribe", "unsub", "opt out", "optout", "manage preferences", "preferences", "preference center",
  "email settings", "notification settings", "manage notifications", "manage subscriptions",
  "manage your subscriptions", "abmelden", "abbestellen", "newsletter abbestellen",
  "einstellungen", "benachrichtigungen", "desabonner", "se desabonner", "desinscrire",
  "desinscription", "desabonnement", "darse de baja", "dar de baja",
  "date de baja", "cancelar suscripcion", "anular suscripcion", "preferencias", "afmelden",
  "uitschrijven", "voorkeuren", "disiscriviti", "annulla iscrizione", "cancella iscrizione",
  "preferenze", "cancelar inscricao", "cancelar assinatura", "descadastrar", "descadastre",
  // legal
  "privacy", "privacy policy", "terms", "terms of service", "terms of use", "tos", "legal",
  "imprint", "impressum", "datenschutz", "datenschutzerklarung", "agb", "nutzungsbedingungen",
  "confidentialite", "mentions legales", "conditions generales", "cgu", "cgv", "privacidad",
  "terminos", "aviso legal", "privacybeleid", "voorwaarden", "termini", "termos", "privacidade",
  // app store badges
  "app store", "google play", "download on the app store", "get it on google play"
]

/**
 * Words that usually mark a footer or a "this wasn't me" link but may also appear around a real
 * verification link ("Help us confirm it's you", "Confirm your Facebook account"). In a URL they
 * exclude it unless the URL itself says it verifies, signs in or resets a password; in the words
 * around a link, unless the words or the URL say so.
 */
const AMBIGUOUS_FOOTER_PHRASES = [
  "help", "help center", "help centre", "helpcenter", "support", "customer service", "contact",
  "contact us", "faq", "faqs", "hilfe", "hilfecenter", "kontakt", "kundenservice", "aide",
  "centre d'aide", "nous contacter", "ayuda", "centro de ayuda", "contacto", "soporte", "hulp",
  "klantenservice", "aiuto", "assistenza", "contatti", "contattaci", "ajuda", "suporte", "contato",
  "report", "not you", "not me", "wasn't you", "wasn't me", "was not you", "didn't request",
  "did not request", "didn't sign up", "did not sign up",
  // social networks, as their footer icons are named
  "facebook", "twitter", "instagram", "linkedin", "youtube", "tiktok", "pinterest"
]

/** App stores: nothing there verifies an address. */
const APP_STORE_HOSTS = ["apps.apple.com", "itunes.apple.com", "play.google.com"]

/**
 * Social networks: their footer icons link to profile pages, but a network's own sign-up mail
 * links to it too, so these exclude a link only when its URL does not say it verifies.
 */
const SOCIAL_HOSTS = [
  "facebook.com", "fb.com", "fb.me", "twitter.com", "x.com", "t.co", "instagram.com",
  "linkedin.com", "youtube.com", "youtu.be", "tiktok.com", "pinterest.com", "threads.net",
  "bsky.app", "discord.gg", "wa.me", "t.me"
]

const VERIFY = stems(VERIFY_STEMS)
const SIGN_IN = phrases(SIGN_IN_PHRASES)
const RESET = stems(RESET_STEMS)
const FOOTER = phrases(FOOTER_PHRASES)
const AMBIGUOUS_FOOTER = phrases(AMBIGUOUS_FOOTER_PHRASES)

const isOnHost = (hostname: string, hosts: ReadonlyArray<string>): boolean =>
  hosts.some((host) => hostname === host || hostname.endsWith(`.${host}`))

/** Query parameters that carry a secret in verification links (Firebase's `oobCode` included). */
const isTokenParameter = (name: string): boolean => {
  const key = name.toLowerCase().replace(/[^a-z]/g, "")
  return key.endsWith("token") || key.endsWith("code") ||
    ["otp", "key", "ticket", "nonce", "hash", "auth", "sig", "signature", "secret"].includes(key)
}

/** A value no person chose: long, or mixing letters and digits. */
const looksRandom = (value: string, minLength: number): boolean =>
  value.length >= minLength && /^[\w.~%+/=-]+$/.test(value) &&
  (value.length >= 24 || (/[0-9]/.test(value) && /[A-Za-z]/.test(value)))

const hasTokenParameter = (url: URL): boolean =>
  [...url.searchParams].some(([name, value]) => isTokenParameter(name) && looksRandom(value, 6))

const hasRandomPathSegment = (url: URL): boolean =>
  url.pathname.split("/").some((segment) => looksRandom(segment, 20))

/** How much each signal counts; the words around a link count more than its URL. */
const WEIGHTS = {
  verifyWords: 6,
  verifyUrl: 5,
  signInOrResetWords: 5,
  signInOrResetUrl: 4,
  tokenParameter: 3,
  randomPathSegment: 2
} as const

/** A token parameter alone qualifies; a random path segment alone (tracking links) does not. */
const MIN_SCORE = 3

/** The score of one occurrence, or undefined when it is a footer link. */
const scoreOccurrence = (occurrence: LinkOccurrence): number | undefined => {
  const url = new URL(occurrence.url)
  const words = foldText(occurrence.context)
  const urlText = urlPhrase(urlWords(url))
  if (isOnHost(url.hostname, APP_STORE_HOSTS) || FOOTER.test(words) || FOOTER.test(urlText)) return undefined

  const verifyWords = VERIFY.test(words)
  const verifyUrl = VERIFY.test(urlText)
  const actionWords = SIGN_IN.test(words) || RESET.test(words)
  const actionUrl = SIGN_IN.test(urlText) || RESET.test(urlText)
  // The URL is better evidence than prose around it: "Didn't change your password? Contact
  // support: https://example.com/support" is a support link.
  const urlSays = verifyUrl || actionUrl
  if ((AMBIGUOUS_FOOTER.test(urlText) || isOnHost(url.hostname, SOCIAL_HOSTS)) && !urlSays) return undefined
  if (AMBIGUOUS_FOOTER.test(words) && !urlSays && !verifyWords && !actionWords) return undefined

  return (verifyWords ? WEIGHTS.verifyWords : 0) +
    (verifyUrl ? WEIGHTS.verifyUrl : 0) +
    (actionWords ? WEIGHTS.signInOrResetWords : 0) +
    (actionUrl ? WEIGHTS.signInOrResetUrl : 0) +
    (hasTokenParameter(url) ? WEIGHTS.tokenParameter : 0) +
    (hasRandomPathSegment(url) ? WEIGHTS.randomPathSegment : 0)
}

interface RankedLink {
  readonly url: string
  readonly firstSeen: number
  /** Undefined while every occurrence so far was a footer link. */
  score: number | undefined
}

/**
 * Up to three distinct verification links, best first (ties in order of appearance: HTML anchors,
 * then URLs in the text). A URL found several times keeps its best score, so the button "Verify"
 * outweighs the same URL under a vaguer line of the text part; a URL that is a footer link by
 * its own address is one at every occurrence.
 */
export const extractVerificationLinks = (
  input: MailBodies,
  /** `messageText(input.text, input.html)`, when the caller has it already. */
  readerText: string = messageText(input.text, input.html)
): ReadonlyArray<string> => {
  const occurrences = [
    ...(input.html === null ? [] : htmlLinkOccurrences(input.html)),
    ...textLinkOccurrences(readerText)
  ]
  const byUrl = new Map<string, RankedLink>()
  occurrences.forEach((occurrence, index) => {
    const score = scoreOccurrence(occurrence)
    const link = byUrl.get(occurrence.url) ?? { url: occurrence.url, firstSeen: index, score: undefined }
    if (score !== undefined) link.score = Math.max(link.score ?? 0, score)
    byUrl.set(occurrence.url, link)
  })
  return [...byUrl.values()]
    .flatMap((link) => (link.score !== undefined && link.score >= MIN_SCORE ? [{ ...link, score: link.score }] : []))
    .sort((a, b) => b.score - a.score || a.firstSeen - b.firstSeen)
    .slice(0, MAX_LINKS)
    .map((link) => link.url)
}
