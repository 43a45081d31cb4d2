import { describe, expect, it } from "@effect/vitest"
import { extractOtpCodes, extractVerificationLinks, otpSourceText } from "../src/mail/index.ts"
import { checked } from "./checked-html.ts"

/**
 * Transactional mails as services send them, each with the exact one-time-code candidates and
 * verification links we expect. Codes are read from the text part, or from the visible text of
 * the HTML when there is no text part; the subject is not read.
 */
interface MailCase {
  readonly name: string
  readonly subject: string
  readonly text?: string
  readonly html?: string
  readonly otpCodes: ReadonlyArray<string>
  readonly verificationLinks: ReadonlyArray<string>
}

/** A centred single-column layout, as most transactional templates have. */
const layout = (content: string, footer = "") => `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Mail</title>
<style>body{margin:0;background:#f4f4f5} .btn{background:#2563eb;color:#fff;padding:12px 24px}</style></head>
<body><table role="presentation" width="100%" cellpadding="0" cellspacing="0"><tr><td align="center">
<table role="presentation" width="600" cellpadding="0" cellspacing="0" style="max-width:600px">
<tr><td style="padding:32px;font-family:Helvetica,Arial,sans-serif">${content}</td></tr>
<tr><td style="padding:16px;font-size:12px;color:#71717a">${footer}</td></tr>
</table></td></tr></table></body></html>`

const MAILS: ReadonlyArray<MailCase> = [
  {
    name: "Slack-style confirmation code written as two groups of three",
    subject: "Slack confirmation code: 482-913",
    text: `Confirm your email address

Your confirmation code is below — enter it in your open browser window and we'll help you get signed in.

482-913

If you didn't request this email, there's nothing to worry about — you can safely ignore it.

Made by Slack Technologies, LLC
500 Howard Street | San Francisco, CA 94105 | United States`,
    otpCodes: ["94105"],
    verificationLinks: []
  },
  {
    name: "device verification code with a security settings link",
    subject: "[GitHub] Please verify your device",
    text: `Hey octo-user!

A sign in attempt requires further verification because we did not recognize your device. To complete the sign in, enter the verification code on the unrecognized device.

Device: Firefox on Ubuntu
Verification code: 731906

If you did not attempt to sign in to your account, your password may be compromised. Visit https://github.com/settings/security to create a new, strong password for your GitHub account.

Thanks,
The GitHub Team`,
    otpCodes: ["731906"],
    verificationLinks: ["https://github.com/settings/security"]
  },
  {
    name: "sign-up confirmation sent as text and HTML with a full footer",
    subject: "Confirm your email for Acme Cloud",
    text: `Welcome to Acme Cloud!

Please confirm your email address by clicking the link below:

https://app.acme-cloud.io/confirm-email?token=q8Zk2LmN4pR7sT1v

This link expires in 24 hours.

Acme Cloud Inc., 2261 Market Street #4667, San Francisco, CA 94114
Unsubscribe: https://app.acme-cloud.io/unsubscribe?u=8842`,
    html: layout(
      `<h1>Welcome to Acme Cloud!</h1><p>Please confirm your email address.</p>
<p><a class="btn" href="https://app.acme-cloud.io/confirm-email?token=q8Zk2LmN4pR7sT1v">Confirm email</a></p>
<p>This link expires in 24 hours.</p>`,
      `Acme Cloud Inc., 2261 Market Street #4667, San Francisco, CA 94114<br>
<a href="https://help.acme-cloud.io">Help Center</a> · <a href="https://acme-cloud.io/privacy">Privacy</a> ·
<a href="https://app.acme-cloud.io/unsubscribe?u=8842">Unsubscribe</a>`
    ),
    otpCodes: ["2261", "4667", "94114"],
    verificationLinks: ["https://app.acme-cloud.io/confirm-email?token=q8Zk2LmN4pR7sT1v"]
  },
  {
    name: "HTML-only magic link with a word login code",
    subject: "Your Notion login link",
    html: layout(
      `<h2>Log in to Notion</h2>
<p>Click the button below to log in to Notion. This link will expire in 10 minutes.</p>
<a href="https://www.notion.so/loginwithemail?state=7f3a1c9e&amp;token=v2%3AKj8sPq0LxTz4">Log in to Notion</a>
<p>Or copy and paste this temporary login code:</p><code>plump-fox-river-812</code>`,
      `<a href="https://www.notion.so">Notion</a>, the connected workspace.<br>
Notion Labs, Inc. 2300 Harrison Street, San Francisco, CA 94110`
    ),
    otpCodes: ["2300", "94110"],
    verificationLinks: ["https://www.notion.so/loginwithemail?state=7f3a1c9e&token=v2%3AKj8sPq0LxTz4"]
  },
  {
    name: "code rendered one digit per inline span joins into one run",
    subject: "Your verification code",
    html: layout(
      `<p>Use this code to finish signing up:</p>
<div class="code" style="font-size:32px;letter-spacing:8px"><span>4</span><span>0</span><span>1</span><span>9</span><span>2</span><span>7</span></div>
<p>It expires in 15 minutes.</p>`,
      `© 2026 Pinepost Ltd.`
    ),
    otpCodes: ["401927", "2026"],
    verificationLinks: []
  },
  {
    name: "code rendered one digit per table cell stays apart (cells read as separate words)",
    subject: "583106 is your verification code",
    html: layout(
      `<p>Enter this code in the app:</p>
<table><tr><td class="digit">5</td><td class="digit">8</td><td class="digit">3</td><td class="digit">1</td><td class="digit">0</td><td class="digit">6</td></tr></table>
<p>It expires in 10 minutes.</p>`
    ),
    otpCodes: [],
    verificationLinks: []
  },
  {
    name: "German password reset in plain text with Hilfe and Datenschutz links",
    subject: "Passwort zurücksetzen",
    text: `Hallo Jana,

jemand hat das Zurücksetzen des Passworts für dein Shopwise-Konto angefordert.

Reset your password / Passwort zurücksetzen: https://accounts.shopwise.de/password/reset/5f1c9e2a-8b7d-4c3e-9a21-7d0e4b6f8c13

Wenn du das nicht warst, kannst du diese E-Mail ignorieren.

Shopwise GmbH, Torstraße 49, 10119 Berlin
Hilfe: https://hilfe.shopwise.de
Datenschutz: https://shopwise.de/datenschutz`,
    otpCodes: ["10119"],
    verificationLinks: ["https://accounts.shopwise.de/password/reset/5f1c9e2a-8b7d-4c3e-9a21-7d0e4b6f8c13"]
  },
  {
    name: "order confirmation: order number parts and the order date come out as candidates",
    subject: "Your order 402-7731994-1182203 has been confirmed",
    text: `Hello Sam,

Thank you for shopping with us. We'll send a confirmation when your item ships.

Order number: 402-7731994-1182203
Order date: 2026-11-21
Order total: $1,299.00

View your order: https://www.shopnow.example/your-orders/order-details?orderID=402-7731994-1182203

Questions? https://www.shopnow.example/help`,
    otpCodes: ["7731994", "1182203", "2026"],
    verificationLinks: []
  },
  {
    name: "shipping notice: a tracking number has no 4-8 digit run, the address and date do",
    subject: "Your package is on its way",
    text: `Good news! Your package is on its way.

Tracking number: 1Z999AA10123456784 (UPS)
Ship to: Jane Doe, 1600 Amphitheatre Pkwy, Mountain View, CA 94043
Estimated delivery: 21.11.2026

Track your package: https://www.ups.com/track?tracknum=1Z999AA10123456784&loc=en_US`,
    otpCodes: ["1600", "94043", "2026"],
    verificationLinks: []
  },
  {
    name: "bank one-time passcode of eight digits followed by a phone number",
    subject: "Your one-time passcode",
    text: `Your one-time passcode is 66120841. It is valid for 5 minutes.

Do not share it with anyone. We will never call you to ask for it.
If you did not request this code, call us at +1 (800) 555-0199.`,
    otpCodes: ["66120841", "0199"],
    verificationLinks: []
  },
  {
    name: "IBAN written in groups of four and an 11-digit account number",
    subject: "Ihre Überweisung wurde ausgeführt",
    text: `Ihre Überweisung über 1.234,56 EUR wurde ausgeführt.

Empfänger-IBAN: DE89 3704 0044 0532 0130 00
Kundennummer: 12345678901

Mit freundlichen Grüßen
Ihre Musterbank`,
    otpCodes: ["3704", "0044", "0532"],
    verificationLinks: []
  },
  {
    name: "code written as 318 274 is not a run; the copyright year is",
    subject: "Dein Bestätigungscode",
    text: `Dein Bestätigungscode lautet 318 274.

Gib ihn in der App ein, um deine Nummer zu bestätigen.

© 2026 Beispiel AG`,
    otpCodes: ["2026"],
    verificationLinks: []
  },
  {
    name: "PIN written as 12-34-56 gives nothing",
    subject: "Your card PIN reminder",
    text: `Your temporary PIN is 12-34-56. Change it at any ATM.`,
    otpCodes: [],
    verificationLinks: []
  },
  {
    name: "Google-style G- prefix and a reference glued to letters",
    subject: "G-482913 is your Google verification code",
    text: `G-482913 is your verification code.

Don't share this code with anyone. Ref ABC1234XYZ`,
    otpCodes: ["482913", "1234"],
    verificationLinks: []
  },
  {
    name: "French sign-up confirmation with désinscription, aide, confidentialité and Facebook",
    subject: "Confirmez votre adresse e-mail",
    html: layout(
      `<p>Bonjour,</p><p>Merci de votre inscription ! Confirmez votre adresse e-mail pour activer votre compte.</p>
<p><a href="https://compte.exemple.fr/c/8Hq2LpX9wZ4rT6yN1mB3">Confirmer mon adresse</a></p>
<p>Ce lien expire dans 48 heures.</p>`,
      `Exemple SAS, 12 rue de la Paix, 75002 Paris<br>
<a href="https://exemple.fr/desinscription?e=bWFyaWU">Se désabonner</a> |
<a href="https://exemple.fr/aide">Aide</a> |
<a href="https://exemple.fr/confidentialite">Confidentialité</a> |
<a href="https://www.facebook.com/exemplefr"><img src="https://exemple.fr/img/fb.png" alt="Facebook"></a>`
    ),
    otpCodes: ["75002"],
    verificationLinks: ["https://compte.exemple.fr/c/8Hq2LpX9wZ4rT6yN1mB3"]
  },
  {
    name: "Spanish account verification with darse de baja, ayuda and privacidad",
    subject: "Verifica tu cuenta",
    html: layout(
      `<p>¡Hola!</p><p>Tu código de verificación es: <strong>904512</strong></p>
<p>También puedes <a href="https://cuenta.ejemplo.es/verificar?codigo=AB12CD34">verificar tu cuenta</a> directamente.</p>`,
      `Ejemplo S.L., Calle de Alcalá 48, 28014 Madrid<br>
<a href="https://ejemplo.es/baja?id=77120">Darse de baja</a> · <a href="https://ejemplo.es/ayuda">Ayuda</a> ·
<a href="https://ejemplo.es/privacidad">Política de privacidad</a>`
    ),
    otpCodes: ["904512", "28014"],
    verificationLinks: ["https://cuenta.ejemplo.es/verificar?codigo=AB12CD34"]
  },
  {
    name: "Dutch address confirmation with afmelden, klantenservice and privacybeleid",
    subject: "Bevestig je e-mailadres",
    html: layout(
      `<p>Hoi!</p><p>Bevestig je e-mailadres om je account te activeren.</p>
<p><a href="https://mijn.voorbeeld.nl/bevestigen/3f9c2a7e1b8d4c6f9e0a">Bevestigen</a></p>`,
      `Voorbeeld B.V., Postbus 1234, 1000 AB Amsterdam<br>
<a href="https://voorbeeld.nl/afmelden?id=5521">Afmelden</a> · <a href="https://voorbeeld.nl/klantenservice">Klantenservice</a> ·
<a href="https://voorbeeld.nl/privacybeleid">Privacybeleid</a>`
    ),
    otpCodes: ["1234", "1000"],
    verificationLinks: ["https://mijn.voorbeeld.nl/bevestigen/3f9c2a7e1b8d4c6f9e0a"]
  },
  {
    name: "Italian registration with disiscriviti, assistenza and Instagram; an 11-digit VAT number",
    subject: "Conferma la tua registrazione",
    html: layout(
      `<p>Ciao Marco,</p><p>grazie per esserti registrato. <a href="https://www.esempio.it/registrazione/conferma?token=Zx81Kq0Pm3">Conferma</a> il tuo indirizzo email.</p>`,
      `Esempio S.r.l. – P.IVA 01234567890 – Via Roma 10, 00184 Roma<br>
<a href="https://www.esempio.it/newsletter/disiscriviti?u=9">Disiscriviti</a> · <a href="https://assistenza.esempio.it">Assistenza</a> ·
<a href="https://www.instagram.com/esempio"><img src="cid:ig@esempio" alt="Instagram"></a>`
    ),
    otpCodes: ["00184"],
    verificationLinks: ["https://www.esempio.it/registrazione/conferma?token=Zx81Kq0Pm3"]
  },
  {
    name: "Brazilian activation with cancelar inscrição, central de ajuda and termos",
    subject: "Ative sua conta",
    html: layout(
      `<p>Olá!</p><p>Falta pouco. <a href="https://app.exemplo.com.br/ativar?token=a1B2c3D4e5">Ativar conta</a></p>`,
      `Exemplo Ltda. – CNPJ 12.345.678/0001-90 – Av. Paulista, 1000 – CEP 01310-100 – São Paulo<br>
<a href="https://exemplo.com.br/cancelar-inscricao?u=55">Cancelar inscrição</a> · <a href="https://ajuda.exemplo.com.br">Central de Ajuda</a> ·
<a href="https://exemplo.com.br/termos">Termos de uso</a>`
    ),
    otpCodes: ["0001", "1000", "01310"],
    verificationLinks: ["https://app.exemplo.com.br/ativar?token=a1B2c3D4e5"]
  },
  {
    name: "German double opt-in with Impressum, Datenschutzerklärung and Abmelden",
    subject: "Bitte bestätigen Sie Ihre Anmeldung",
    html: layout(
      `<p>Guten Tag,</p><p>bitte bestätigen Sie Ihre Anmeldung zu unserem Newsletter:</p>
<p><a href="https://news.beispiel.de/optin/confirm?h=9f8e7d6c5b4a">Anmeldung bestätigen</a></p>`,
      `Beispiel GmbH, Musterstraße 12, 80331 München, Tel. +49 89 1234567<br>
<a href="https://beispiel.de/impressum">Impressum</a> · <a href="https://beispiel.de/datenschutz">Datenschutzerklärung</a> ·
<a href="https://news.beispiel.de/abmelden?h=9f8e7d6c5b4a">Abmelden</a>`
    ),
    otpCodes: ["80331", "1234567"],
    verificationLinks: ["https://news.beispiel.de/optin/confirm?h=9f8e7d6c5b4a"]
  },
  {
    name: "new sign-in alert: the 'Not you?' link is not a verification link",
    subject: "New sign-in to your account",
    text: `New sign-in to your account

We noticed a new sign-in from Chrome on Windows (Berlin, Germany) on 21.11.2026 at 14:32.
If this was you, you can ignore this message.

Not you? Secure your account: https://account.mailhost.example/security/checkup?ref=alert`,
    otpCodes: ["2026"],
    verificationLinks: []
  },
  {
    name: "newsletter with only footer links in several languages",
    subject: "Black Week: bis zu 50 % Rabatt",
    html: layout(
      `<h1>Black Week</h1><p>Nur bis 30.11.2026: bis zu 50 % auf alles.</p>
<p><a href="https://shop.example.de/black-week?utm_source=newsletter">Jetzt shoppen</a></p>`,
      `© 2026 Example Shop GmbH<br>
<a href="https://shop.example.de/newsletter/abbestellen?id=1">Newsletter abbestellen</a> ·
<a href="https://shop.example.de/account/preferences">Manage preferences</a> ·
<a href="https://apps.apple.com/de/app/example-shop/id1234567890"><img alt="Laden im App Store"></a>
<a href="https://play.google.com/store/apps/details?id=de.example.shop"><img alt="Jetzt bei Google Play"></a>
<a href="https://www.youtube.com/@exampleshop">YouTube</a> <a href="https://www.tiktok.com/@exampleshop">TikTok</a>
<a href="https://www.linkedin.com/company/example-shop">LinkedIn</a> <a href="https://x.com/exampleshop">X</a>`
    ),
    otpCodes: ["2026"],
    verificationLinks: []
  },
  {
    name: "javascript: and mailto: links are refused even when they say verify",
    subject: "Verify your account",
    html: layout(
      `<p><a href="javascript:verify()">Verify account</a></p>
<p><a href="  JaVaScRiPt:alert(1)">Confirm email</a></p>
<p><a href="mailto:verify@example.com?subject=verify">Verify by mail</a></p>`
    ),
    otpCodes: [],
    verificationLinks: []
  },
  {
    name: "entity-encoded ampersand in an href is decoded",
    subject: "Verify your email address",
    html: layout(
      `<p>Hi user 42, please verify your email address.</p>
<p><a href="https://auth.example.net/verify?user=42&amp;token=Tk9Qm2Xa7Lp">Verify email</a></p>`
    ),
    otpCodes: [],
    verificationLinks: ["https://auth.example.net/verify?user=42&token=Tk9Qm2Xa7Lp"]
  },
  {
    name: "text URLs lose trailing punctuation and an unmatched bracket; the stronger one ranks first",
    subject: "Confirm your address",
    text: `Confirm your address here: https://example.org/confirm?t=Ab3dE5gH9k.

If the link above doesn't work, activate your account with this one instead:
(https://example.org/activate/AbC123xYz789QwE456rT)`,
    otpCodes: [],
    verificationLinks: [
      "https://example.org/activate/AbC123xYz789QwE456rT",
      "https://example.org/confirm?t=Ab3dE5gH9k"
    ]
  },
  {
    name: "verification link ranks above a log-in link that comes first",
    subject: "Verify your email to finish setting up Linear",
    html: layout(
      `<p style="text-align:right"><a href="https://linear.app/login">Log in</a></p>
<p>You're almost there! Verify your email address to finish setting up your workspace.</p>
<p><a href="https://linear.app/verify-email?token=Lr2x8KpQ0mZ3">Verify email address</a></p>`
    ),
    otpCodes: [],
    verificationLinks: ["https://linear.app/verify-email?token=Lr2x8KpQ0mZ3", "https://linear.app/login"]
  },
  {
    name: "more than three candidates: the best three, best first",
    subject: "Welcome to Fieldnote",
    html: layout(
      `<p><a href="https://fieldnote.app/signin">Sign in</a></p>
<p><a href="https://fieldnote.app/account/activate?key=9dK3mP0qR2">Activate your account</a></p>
<p><a href="https://fieldnote.app/password/new">Set a password</a></p>
<p><a href="https://fieldnote.app/email/confirm?token=Qw8Er7Ty6U">Confirm email</a></p>
<p><a href="https://fieldnote.app/docs/getting-started">Read the docs</a></p>`
    ),
    otpCodes: [],
    verificationLinks: [
      "https://fieldnote.app/account/activate?key=9dK3mP0qR2",
      "https://fieldnote.app/email/confirm?token=Qw8Er7Ty6U",
      // ties with "Set a password" and wins by coming first
      "https://fieldnote.app/signin"
    ]
  },
  {
    name: "click-tracked verification link counts by its anchor text",
    subject: "Please verify your email",
    html: layout(
      `<p>Thanks for signing up for Brightwave!</p>
<p><a href="https://u1234567.ct.sendgrid.net/ls/click?upn=u001.Xk2Lp9Qz-2BmN4aWq7Rt">Verify Email Address</a></p>
<p><a href="https://u1234567.ct.sendgrid.net/ls/click?upn=u001.Bb7Cc8Dd9-2FeE1gH2iJ">View in browser</a></p>`,
      `<a href="https://u1234567.ct.sendgrid.net/ls/click?upn=u001.Zz9Yy8Xx7-2BwW6vV5uU">Unsubscribe</a>`
    ),
    otpCodes: [],
    verificationLinks: ["https://u1234567.ct.sendgrid.net/ls/click?upn=u001.Xk2Lp9Qz-2BmN4aWq7Rt"]
  },
  {
    name: "newsletter tracking link with a random path segment is not a verification link",
    subject: "This week in Rust",
    html: layout(
      `<p><a href="https://click.news.example.com/c/eJwNyrEOgjAQgOGnKWMpVxI/42">Read more</a></p>`
    ),
    otpCodes: [],
    verificationLinks: []
  },
  {
    name: "payment receipt: receipt number, date and card digits",
    subject: "Your receipt from Tandem #2041-7731",
    text: `Receipt #2041-7731

Amount paid   $1,299.00
Date paid     Nov 21, 2026
Payment method  Visa – 4242

View receipt: https://pay.tandem.example/receipts/acct_1Nv0FGQ9RKHgCVdK/rcpt_Ox1Q2w3E4r5T6y7U8i9O0p`,
    otpCodes: ["2041", "7731", "2026"],
    verificationLinks: []
  },
  {
    name: "the same code twice (text and domain-bound line) counts once",
    subject: "Your Apple Account Code",
    text: `Your Apple Account Code is: 804312. Don't share it with anyone.

@apple.com #804312`,
    otpCodes: ["804312"],
    verificationLinks: []
  },
  {
    name: "digits in the recipient address are not read",
    subject: "Your Discord login code",
    text: `Hi swift-otter-4821@burnbox.test,

your login code is 5531.`,
    otpCodes: ["5531"],
    verificationLinks: []
  },
  {
    name: "digits in a URL are not read",
    subject: "Confirm your subscription",
    text: `Confirm: https://example.com/c/99887766?x=1234
Or enter the code 246810 on the page.`,
    otpCodes: ["246810"],
    verificationLinks: ["https://example.com/c/99887766?x=1234"]
  },
  {
    name: "code with zero-width spaces and a no-break space between HTML entities",
    subject: "Your code",
    html: layout(`<p>Code:&nbsp;<b>7&#8203;3&#8203;9&#8203;1&#8203;0&#8203;2</b></p>`),
    otpCodes: ["739102"],
    verificationLinks: []
  },
  {
    name: "hidden preheader repeats the code; title and style text are not read",
    subject: "615243 is your code",
    html: `<html><head><title>Sign in 2026</title><style>.x{width:6000px}</style></head><body>
<div style="display:none;max-height:0;overflow:hidden">Your code is 615243&#847;&zwnj;&nbsp;&#847;&zwnj;</div>
<h1>615243</h1><p>Enter it to sign in.</p></body></html>`,
    otpCodes: ["615243"],
    verificationLinks: []
  },
  {
    name: "the text part is read, not the HTML part",
    subject: "Your login code",
    text: "Your login code: 482113",
    html: layout(`<p>Your login code: <b>482113</b></p>`, `© 2026 Example Inc.`),
    otpCodes: ["482113"],
    verificationLinks: []
  },
  {
    name: "a blank text part falls back to the HTML",
    subject: "Your code",
    text: "   \n",
    html: `<p>Your code is <b>770088</b></p>`,
    otpCodes: ["770088"],
    verificationLinks: []
  },
  {
    name: "a mail with no body",
    subject: "(no subject) 123456",
    otpCodes: [],
    verificationLinks: []
  },
  {
    name: "invoice: amounts and ISO dates",
    subject: "Invoice INV-0042 is due",
    text: `Your invoice INV-0042 for €1.234,56 is due on 2026-12-01.

Pay now: https://billing.example.com/pay/inv_0042`,
    otpCodes: ["0042", "2026"],
    verificationLinks: []
  },
  {
    name: "login code and magic link in one mail",
    subject: "Sign in to Vercel",
    text: `Your login code is 924163.

Or use this link to sign in: https://vercel.com/api/auth/callback/email?token=5a8c0e2d4f6b&email=user%40burnbox.test`,
    otpCodes: ["924163"],
    verificationLinks: ["https://vercel.com/api/auth/callback/email?token=5a8c0e2d4f6b&email=user%40burnbox.test"]
  },
  {
    name: "hrefs are normalized (scheme and host case, root path, surrounding spaces)",
    subject: "Sign in to Example",
    html: layout(`<p><a href="HTTPS://Example.COM">Sign in</a></p><p><a href="
      https://example.com/login?next=%2Fdashboard  ">Log in</a></p>`),
    otpCodes: [],
    // "Log in" plus /login outranks "Sign in" alone
    verificationLinks: ["https://example.com/login?next=%2Fdashboard", "https://example.com/"]
  },
  {
    name: "app store badges with only alt text are footer links",
    subject: "Confirm your email",
    html: layout(
      `<p><a href="https://hey.example/confirm/u8Kp2Lm9Qz">Confirm your email</a></p>`,
      `<a href="https://apps.apple.com/app/id123456789"><img src="cid:appstore" alt="Download on the App Store"></a>
<a href="https://play.google.com/store/apps/details?id=com.hey"><img src="cid:play" alt="Get it on Google Play"></a>`
    ),
    otpCodes: [],
    verificationLinks: ["https://hey.example/confirm/u8Kp2Lm9Qz"]
  },
  {
    name: "relative and protocol-relative hrefs cannot be resolved and are refused",
    subject: "Verify your email",
    html: layout(
      `<p><a href="//example.com/verify?token=abc123xyz">Verify</a></p><p><a href="/verify?token=abc123xyz">Verify</a></p>`
    ),
    otpCodes: [],
    verificationLinks: []
  },
  {
    name: "an 18-digit transaction id gives nothing; a short auth code keeps its leading zeros",
    subject: "Payment authorized",
    text: `Transaction ID 202611211432559001
Authorization code 0071`,
    otpCodes: ["0071"],
    verificationLinks: []
  },
  {
    name: "German plain-text newsletter: anmelden counts, abmelden and Einstellungen do not",
    subject: "Neu bei Beispiel",
    text: `Hallo!

Jetzt anmelden: https://beispiel.de/login

Newsletter abmelden: https://beispiel.de/nl/abmelden?id=31
Einstellungen verwalten: https://beispiel.de/konto/einstellungen
Impressum: https://beispiel.de/impressum`,
    otpCodes: [],
    verificationLinks: ["https://beispiel.de/login"]
  },
  {
    name: "a social network's own confirmation link is kept; its help link is not",
    subject: "Confirm your Facebook account",
    html: layout(
      `<p>Hi, you're almost done. Confirm your account below.</p>
<p><a href="https://www.facebook.com/confirmemail.php?e=user%40burnbox.test&amp;c=48213&amp;z=0">Confirm your account</a></p>
<p>Or enter this code: 48213</p>`,
      `<a href="https://www.facebook.com/help">Help Center</a>`
    ),
    otpCodes: ["48213"],
    verificationLinks: ["https://www.facebook.com/confirmemail.php?e=user%40burnbox.test&c=48213&z=0"]
  },
  {
    name: "an unlinked URL in HTML text is found by its own words",
    subject: "Verify your address",
    html: layout(
      `<p>Copy this link into your browser:<br>https://example.com/verify/Yh7Kq2Lw9Zp3Xn5Rt8Vb</p>`
    ),
    otpCodes: [],
    verificationLinks: ["https://example.com/verify/Yh7Kq2Lw9Zp3Xn5Rt8Vb"]
  },
  {
    name: "Japanese mail: ASCII digits next to CJK letters form a run",
    subject: "認証コードのお知らせ",
    text: `認証コードは302918です。有効期限は10分です。`,
    otpCodes: ["302918"],
    verificationLinks: []
  },
  {
    name: "full-width digits are not ASCII digits",
    subject: "認証コード",
    text: `認証コード：４８２９１３`,
    otpCodes: [],
    verificationLinks: []
  },
  {
    name: "a URL in angle brackets in plain text",
    subject: "Activate your account",
    text: `Activate your account <https://example.com/activate?key=9dK3mP0qR2>`,
    otpCodes: [],
    verificationLinks: ["https://example.com/activate?key=9dK3mP0qR2"]
  },
  {
    name: "security notice: 'didn't change your password? contact support' is a support link",
    subject: "Your password was changed",
    text: `Your password was changed on 2026-11-21.

If you didn't change your password, contact support: https://support.example.com/hc/requests/new`,
    otpCodes: ["2026"],
    verificationLinks: []
  },
  {
    name: "'help us confirm it's you' around a verification URL is not a footer",
    subject: "Help us confirm it's you",
    text: `Help us confirm it's you: https://id.example.com/verify?token=Hx72kQp0Lm`,
    otpCodes: [],
    verificationLinks: ["https://id.example.com/verify?token=Hx72kQp0Lm"]
  },
  {
    name: "the same URL in the HTML button and the text part is returned once",
    subject: "Reset your password",
    text: `Reset your password:
https://acme.example/reset?token=Rz81Kq0Pm3Xw`,
    html: layout(`<p><a href="https://acme.example/reset?token=Rz81Kq0Pm3Xw">Reset password</a></p>`),
    otpCodes: [],
    verificationLinks: ["https://acme.example/reset?token=Rz81Kq0Pm3Xw"]
  },
  {
    name: "a token parameter alone makes a link behind 'click here' count",
    subject: "Finish signing up",
    html: layout(`<p>To finish, <a href="https://join.example.net/next?token=Kq8Wm2Zx0Lp4">click here</a>.</p>`),
    otpCodes: [],
    verificationLinks: ["https://join.example.net/next?token=Kq8Wm2Zx0Lp4"]
  }
]

describe("one-time codes and verification links in real-looking mails", () => {
  it("has at least 40 mails", () => {
    expect(MAILS.length).toBeGreaterThanOrEqual(40)
  })

  for (const mail of MAILS) {
    it(mail.name, () => {
      const text = mail.text ?? null
      const html = mail.html ?? null
      expect({
        otpCodes: extractOtpCodes(otpSourceText(text, html)),
        verificationLinks: extractVerificationLinks({ text, html: html === null ? null : checked(html) })
      }).toEqual({ otpCodes: mail.otpCodes, verificationLinks: mail.verificationLinks })
    })
  }
})

describe("extractOtpCodes", () => {
  it("keeps at most three codes, in order of first appearance", () => {
    expect(extractOtpCodes("1111 2222 1111 3333 4444")).toEqual(["1111", "2222", "3333"])
  })

  it("reads digits split by zero-width characters as one run, as they appear on screen", () => {
    expect(extractOtpCodes("Code: 4\u200b8\u200c2\u200d9\ufeff1\u00ad3")).toEqual(["482913"])
  })

  it("takes runs of exactly 4 to 8 digits", () => {
    expect(extractOtpCodes("123 1234 12345678 123456789")).toEqual(["1234", "12345678"])
  })

  it("stays linear on a long unbroken string", () => {
    const started = performance.now()
    expect(extractOtpCodes("a".repeat(200_000) + " 4321")).toEqual(["4321"])
    // Generous: quadratic work over 200,000 characters takes tens of seconds, a busy machine seconds.
    expect(performance.now() - started).toBeLessThan(10_000)
  })
})

describe("otpSourceText", () => {
  it("is the text part when there is one", () => {
    expect(otpSourceText("plain", "<p>html</p>")).toBe("plain")
  })

  it("is the visible text of the HTML otherwise, entities decoded", () => {
    expect(otpSourceText(null, "<p>Tom &amp; Jerry&nbsp;&lt;3</p><script>var code = 1234</script>")).toBe("Tom & Jerry <3")
  })

  it("is empty without any body", () => {
    expect(otpSourceText(null, null)).toBe("")
  })
})
