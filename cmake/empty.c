/* Placeholder so that a module without sources still forms a library. */
typedef int bmoe_empty_translation_unit;
