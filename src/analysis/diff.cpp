// placeholder: replaced in the same change
