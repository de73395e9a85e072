// placeholder: the explorer script (helper branch i39-js)
